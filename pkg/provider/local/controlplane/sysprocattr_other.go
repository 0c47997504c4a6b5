//go:build !linux

package controlplane

import "syscall"

// sysProcAttr puts the child in its own process group. Without Linux's
// parent-death signal, children outlive a caller that is killed with SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
