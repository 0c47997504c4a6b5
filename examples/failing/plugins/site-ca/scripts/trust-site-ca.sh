#!/bin/sh
# Makes the machine trust the organisation's root CA before the node joins
# (kubeplug site-ca, hook trust-site-ca, beforeNodeup): installs the caBundle value
# (written to /etc/kubeplug/site-ca/bundle.pem) into the system's CA directory, or,
# when it is empty, requires the machine image to have the CA there already.
#
# Paths are under the machine's root, ${KUBEPLUG_ROOT} ("/" on a real machine, the
# node's directory on the local provider's simulated nodes).
set -eu

root=${KUBEPLUG_ROOT:-}
root=${root%/}
node=${KUBEPLUG_NODE:-$(hostname)}
bundle=/etc/kubeplug/site-ca/bundle.pem
trusted=/usr/local/share/ca-certificates/site-ca.crt

fail() {
	echo "site-ca: $*" >&2
	exit 1
}

if [ -s "$root$bundle" ]; then
	grep -q -e '-----BEGIN CERTIFICATE-----' "$root$bundle" || fail "$bundle holds no PEM certificate"
	mkdir -p "$root$(dirname "$trusted")"
	cp "$root$bundle" "$root$trusted.new"
	mv -f "$root$trusted.new" "$root$trusted"
	echo "site-ca: installed the caBundle value as $trusted"
elif [ -s "$root$trusted" ]; then
	echo "site-ca: the machine image already trusts the site CA ($trusted)"
else
	fail "node $node does not trust the site CA: the site-ca value caBundle is empty and the machine image has no $trusted; set caBundle in the cluster file (PEM) or bake the CA into the image"
fi

# Rebuild the system trust store on a real machine only: a simulated node's root
# is a directory on the host, whose own trust store must stay as it is.
if [ -z "$root" ] && command -v update-ca-certificates >/dev/null 2>&1; then
	update-ca-certificates
fi
