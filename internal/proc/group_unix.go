//go:build unix

package proc

import (
	"errors"
	"os/exec"
	"syscall"
)

// Isolate makes cmd the leader of a new process group, so that KillGroup reaches
// everything it starts, and (where the platform has it) asks the kernel to kill it
// when the host dies.
func Isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(cmd.SysProcAttr)
}

// KillGroup kills the process group led by pid. A group that is already gone is
// not an error.
func KillGroup(pid int) error {
	if pid <= 0 {
		return nil
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
