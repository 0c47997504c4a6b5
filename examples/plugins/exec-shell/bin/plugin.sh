#!/bin/sh
# An exec plugin in plain POSIX sh: kubeplug writes one JSON request to stdin and
# reads one JSON response from stdout (docs/plugin-protocol.md). This one needs no
# JSON parser: it learns the stage from $KUBEPLUG_STAGE and answers with a fixed
# contribution, an API server flag.
set -eu

# Read the request even though this plugin does not need it.
cat >/dev/null

case "${KUBEPLUG_STAGE:-}" in
initialise)
	echo "exec-shell: contributing audit-log-maxage" >&2
	cat <<'JSON'
{"protocolVersion":"kubeplug.dev/exec/v1","contribution":{"controlPlane":{"components":{"kube-apiserver":{"flags":{"audit-log-maxage":{"value":"30"}}}}}}}
JSON
	;;
*)
	# Exit status 3 with nothing on stdout: this stage is not implemented.
	exit 3
	;;
esac
