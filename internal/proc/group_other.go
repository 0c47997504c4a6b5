//go:build !unix

package proc

import (
	"os"
	"os/exec"
)

// Isolate does nothing where process groups do not exist.
func Isolate(*exec.Cmd) {}

// KillGroup kills the process pid only.
func KillGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	return p.Kill()
}
