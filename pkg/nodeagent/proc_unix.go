//go:build unix

package nodeagent

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// ownGroup puts the hook in a process group of its own, so that killing the group
// reaches whatever the hook started.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// signalGroup signals every process in the hook's group; a group already gone is fine.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	if err := syscall.Kill(-p.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// lockFile takes an exclusive lock without waiting: two agents running one phase on
// one root would run every hook twice.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) //nolint:gosec // a file descriptor fits an int
}
