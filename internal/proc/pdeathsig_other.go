//go:build unix && !linux

package proc

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}
