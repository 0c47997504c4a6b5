#!/bin/sh
# Makes sure node_exporter is installed, in the expected version, before the node
# joins (kubeplug node-monitoring, hook install-node-exporter, beforeNodeup).
#
# Every path the machine owns is under the machine's root, ${KUBEPLUG_ROOT} (set by
# the node agent; "/" or unset on a real machine, <state>/machines/<node>/root on a
# simulated node of the local provider): the settings file, the binary and the
# textfile directory. Settings come from <root>/etc/default/node-exporter, written
# from the plugin's values (NODE_EXPORTER_CONF names another file, as given, for
# testing):
#   NODE_EXPORTER_BIN      where the binary goes (a path on the machine)
#   NODE_EXPORTER_VERSION  the version expected; empty accepts any installed one
#   NODE_EXPORTER_SOURCE   an absolute path (binary or release .tar.gz) or https URL
#   NODE_EXPORTER_SHA256   the source's sha256, required for a URL
#   NODE_EXPORTER_ARGS     read for --collector.textfile.directory (on the machine)
# A source path is looked up on the machine (under the root) first, then as given:
# on the local provider a host path acts like a mount every machine shares, so one
# binary built on the host serves every simulated node.
# Exits 0 when the binary is in place, non-zero with what is missing otherwise.
set -eu

# "/" becomes "", so a real machine's paths stay as they are.
root=${KUBEPLUG_ROOT:-}
root=${root%/}

conf=${NODE_EXPORTER_CONF:-$root/etc/default/node-exporter}
if [ -r "$conf" ]; then
	# shellcheck disable=SC1090
	. "$conf"
else
	echo "node-monitoring: $conf is missing; using the defaults" >&2
fi
bin=$root${NODE_EXPORTER_BIN:-/usr/local/bin/node_exporter}
want=${NODE_EXPORTER_VERSION:-}
src=${NODE_EXPORTER_SOURCE:-}
sum=${NODE_EXPORTER_SHA256:-}

log() { echo "node-monitoring: $*"; }
fail() {
	echo "node-monitoring: $*" >&2
	exit 1
}

installed_version() {
	# "node_exporter, version 1.9.1 (branch: ...)" -> 1.9.1
	"$1" --version 2>&1 | sed -n 's/^node_exporter, version \([^ ]*\).*/\1/p' | head -n 1
}

# The textfile collector's directory, so node-local jobs can drop *.prom files.
textdir=$(printf '%s\n' "${NODE_EXPORTER_ARGS:-}" | tr ' ' '\n' | sed -n 's/^--collector\.textfile\.directory=//p' | head -n 1)
if [ -n "$textdir" ]; then
	mkdir -p "$root$textdir"
	chmod 0755 "$root$textdir"
fi

if [ -x "$bin" ]; then
	have=$(installed_version "$bin")
	if [ -z "$want" ] || [ "$have" = "$want" ]; then
		log "node_exporter ${have:-(unknown version)} is installed at $bin"
		exit 0
	fi
	log "node_exporter at $bin is version ${have:-unknown}, expected $want: replacing it"
fi

if [ -z "$src" ]; then
	fail "node_exporter ${want} is missing at $bin and no source is configured; bake it into the machine image or set the node-monitoring value 'source' (a path on the machine or an https URL with 'sha256')"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

case $src in
https://*)
	[ -n "$sum" ] || fail "source $src is a URL but no sha256 is set; refusing to install an unverified binary"
	file=$tmp/download
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL --retry 3 -o "$file" "$src" || fail "cannot download $src"
	elif command -v wget >/dev/null 2>&1; then
		wget -q -O "$file" "$src" || fail "cannot download $src"
	else
		fail "source $src is a URL but neither curl nor wget is installed"
	fi
	;;
/*)
	if [ -n "$root" ] && [ -f "$root$src" ]; then
		file=$root$src
	elif [ -f "$src" ]; then
		file=$src
		[ -z "$root" ] || log "source $src is not on this machine ($root$src); using the host's"
	elif [ -n "$root" ]; then
		fail "source $src exists neither on this machine ($root$src) nor on the host"
	else
		fail "source $src does not exist on this machine"
	fi
	;;
*)
	fail "source $src is neither an absolute path nor an https URL"
	;;
esac

if [ -n "$sum" ]; then
	command -v sha256sum >/dev/null 2>&1 || fail "sha256sum is not installed; cannot verify $src"
	got=$(sha256sum "$file" | cut -d ' ' -f 1)
	[ "$got" = "$sum" ] || fail "$src has sha256 $got, expected $sum"
fi

case $src in
*.tar.gz | *.tgz)
	tar -xzf "$file" -C "$tmp" || fail "cannot unpack $src"
	found=$(find "$tmp" -type f -name node_exporter | head -n 1)
	[ -n "$found" ] || fail "$src holds no node_exporter binary"
	file=$found
	;;
esac

have=$(installed_version "$file" || true)
if [ -n "$want" ] && [ "$have" != "$want" ]; then
	fail "$src is node_exporter ${have:-of unknown version}, expected $want"
fi

mkdir -p "$(dirname "$bin")"
# Install through a temporary name and rename, so a running unit never sees half a file.
cp "$file" "$bin.new"
chmod 0755 "$bin.new"
mv -f "$bin.new" "$bin"
log "installed node_exporter ${have} at $bin from $src"
