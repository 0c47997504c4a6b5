// Package hosts is the end-to-end test of the hosts provider
// (spec.provider.hosts) against real OpenSSH servers: systemd machines booted
// from the machine image's base layer alone (Debian with systemd, cloud-init,
// openssh-server, sudo, runc and the CNI plugins — none of kubeplug's node
// programs), given only a user with a per-test key. The provider treats them
// as foreign hosts: the machine mode's own delivery is not used.
package hosts
