"""moto's server mode, as kubeplug's tests run it.

It is `moto_server` with three corrections, each making the emulator answer
as CloudFormation documents it where kubeplug's deploy depends on it; nothing
else differs. moto 5.2.x:

1. executes a change set by updating the stack's resources only, so a stack
   created or updated through a change set reports no outputs, keeps its old
   parameters and never becomes unchanged again. Corrected: the change set's
   template and parameters become the stack's and its outputs are computed.
2. creates every AWS::ElasticLoadBalancingV2::LoadBalancer of a template as an
   application load balancer, ignoring Properties.Type, so a network load
   balancer's TCP listener is refused. Corrected: Properties.Type is passed on.
3. splits a list parameter (List<...>, CommaDelimitedList) given a value but
   not its Default, so a resource taking a default list of subnets gets one
   string. Corrected: a list parameter's default is split at commas too.

docs/aws.md lists what moto does not model. Usage, as moto_server:
kubeplug_moto.py -H 127.0.0.1 -p PORT
"""

import sys

from moto.cloudformation import models, parsing
from moto.elbv2 import models as elbv2
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

_create_lb = elbv2.FakeLoadBalancer.create_from_cloudformation_json.__func__


def _create_lb_with_type(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
    properties = cloudformation_json["Properties"]
    lb_type = properties.get("Type", "application")
    backend = elbv2.elbv2_backends[account_id][region_name]
    return backend.create_load_balancer(
        resource_name,
        properties.get("SecurityGroups"),
        properties.get("Subnets"),
        scheme=properties.get("Scheme", "internet-facing"),
        loadbalancer_type=lb_type,
    )


elbv2.FakeLoadBalancer.create_from_cloudformation_json = classmethod(_create_lb_with_type)

_load_parameters = parsing.ResourceMap.load_parameters


def _load_parameters_splitting_defaults(self):
    _load_parameters(self)
    for name, slot in (self._template.get("Parameters") or {}).items():
        kind = slot.get("Type", "String")
        value = self.resolved_parameters.get(name)
        if (kind == "CommaDelimitedList" or kind.startswith("List<")) and isinstance(value, str):
            value = value.split(",")
            if kind == "List<Number>":
                value = [float(v) if "." in v else int(v) for v in value]
            self.resolved_parameters[name] = value
            self._parsed_resources[name] = value


parsing.ResourceMap.load_parameters = _load_parameters_splitting_defaults

if __name__ == "__main__":
    sys.exit(main())
