//go:build !linux

package controlplane

import (
	"errors"
	"syscall"
)

// detachedSysProcAttr starts the child in a session of its own (hence its own
// process group), so that it outlives the caller.
func detachedSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}

// procStartTime is unknown outside Linux; pid reuse is not detected there.
func procStartTime(int) (uint64, error) { return 0, errors.New("process start time: not supported") }

// processAlive says whether pid runs (signal 0 reaches it).
func processAlive(pid int, _ uint64) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}
