"""moto's server mode, as kubeplug's tests run it.

It is `moto_server` with one correction, so that the emulator answers as
CloudFormation does where kubeplug depends on it: executing a change set makes
its template and parameters the stack's own and computes the stack's outputs
from them. moto (5.2.x) only updates the stack's resources, so a stack created
or updated through a change set reports no outputs, keeps its old parameters
and never becomes unchanged again. docs/aws.md lists what else moto does not
model. Usage: kubeplug_moto.py -H 127.0.0.1 -p PORT (as moto_server).
"""

import sys

from moto.cloudformation import models
from moto.server import main

_apply = models.ChangeSet.apply


def _apply_like_cloudformation(self):
    _apply(self)
    stack = self.stack
    stack.template = self.template
    stack._parse_template()
    stack.parameters = self.parameters
    stack.output_map = stack._create_output_map()


models.ChangeSet.apply = _apply_like_cloudformation

if __name__ == "__main__":
    sys.exit(main())
