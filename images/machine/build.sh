#!/usr/bin/env bash
# Builds the kubeplug machine image: the root filesystem a local machine
# (spec.provider.local.machines) boots, as two layers an overlay mount stacks:
#
#   base-<digest>   Debian bookworm from debootstrap with the packages of
#                   packages.txt (systemd, cloud-init, runc, CNI plugins, ...).
#                   <digest> covers the suite, packages.txt and this script.
#   node-<digest>   the project's own binaries (kubeplug's node agent,
#                   containerd, the kubelet and kube-proxy) and files/ (units,
#                   containerd's and cloud-init's configuration). <digest>
#                   covers every byte of them.
#
# Each layer is built into a temporary directory and renamed when complete,
# so an interrupted build leaves no half layer; a layer whose digest exists is
# not built again. image.json names the current pair; the local provider reads
# it (and checks that both layers exist).
#
# usage: build.sh OUT KUBEPLUG LOCALCLUSTER_BIN LOCALNODE_BIN
set -euo pipefail
out=$1 kubeplug=$2 lcbin=$3 lnbin=$4
here=$(cd "$(dirname "$0")" && pwd)
suite=bookworm
mkdir -p "$out"

[ "$(id -u)" = 0 ] || { echo "machine-image: debootstrap needs root" >&2; exit 1; }

pkgs=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/packages.txt" | tr -d ' ' | paste -sd, -)
base_digest=$( { echo "$suite"; echo "$pkgs"; sed -n '/^# base layer begin/,/^# base layer end/p' "$0"; } | sha256sum | cut -c1-16)
base=$out/base-$base_digest

# base layer begin
if [ ! -d "$base" ]; then
  command -v debootstrap >/dev/null || { echo "machine-image: debootstrap is missing (make machine-image installs it)" >&2; exit 1; }
  tmp=$out/.base-$base_digest.tmp
  rm -rf "$tmp"
  echo "machine-image: debootstrap $suite with $pkgs"
  debootstrap --variant=minbase --include="$pkgs" "$suite" "$tmp" >"$out/debootstrap.log" 2>&1 || {
    tail -20 "$out/debootstrap.log" >&2; echo "machine-image: debootstrap failed, log: $out/debootstrap.log" >&2; exit 1; }
  # A machine has no console login and no hardware to wait for.
  chroot "$tmp" systemctl mask getty@tty1.service serial-getty@.service console-getty.service \
    systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service \
    systemd-remount-fs.service sys-kernel-debug.mount sys-kernel-tracing.mount >/dev/null 2>&1
  chroot "$tmp" systemctl enable systemd-networkd.service >/dev/null 2>&1
  rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
  : >"$tmp/etc/machine-id"
  mv "$tmp" "$base"
fi
# base layer end

# The node layer's inputs, in a stable order: binaries first, then files/.
stage=$(mktemp -d "$out/.node.XXXXXX")
trap 'rm -rf "$stage"' EXIT
install -D -m 0755 "$kubeplug" "$stage/usr/local/bin/kubeplug"
install -D -m 0755 "$lnbin/containerd" "$stage/usr/local/bin/containerd"
install -D -m 0755 "$lnbin/containerd-shim-runc-v2" "$stage/usr/local/bin/containerd-shim-runc-v2"
install -D -m 0755 "$(readlink -f "$lcbin/kubeplug-localcluster")" "$stage/usr/local/lib/kubeplug/kubeplug-localcluster"
mkdir -p "$stage/usr/bin"
for c in kubelet kube-proxy; do ln -s ../local/lib/kubeplug/kubeplug-localcluster "$stage/usr/bin/$c"; done
cp -a "$here/files/." "$stage/"
node_digest=$(cd "$stage" && find . \( -type f -o -type l \) -print0 | sort -z |
  xargs -0 -I{} sh -c 'printf "%s %s\n" "{}" "$( [ -L "{}" ] && readlink "{}" || sha256sum <"{}" | cut -c1-64)"' | sha256sum | cut -c1-16)
node=$out/node-$node_digest
if [ ! -d "$node" ]; then
  mv "$stage" "$node"
  trap - EXIT
fi
cat >"$out/image.json.tmp" <<JSON
{"base": "base-$base_digest", "node": "node-$node_digest"}
JSON
mv "$out/image.json.tmp" "$out/image.json"
echo "machine-image: $out/image.json (base-$base_digest, node-$node_digest)"
