package controlplane

import "syscall"

// sysProcAttr puts the child in its own process group (so Stop can signal the
// whole group) and asks the kernel to SIGKILL it when the spawning thread dies
// (see spawner).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
