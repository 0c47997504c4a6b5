//go:build !unix

package nodeagent

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// The node agent runs on Linux machines; elsewhere it builds but cannot run hooks.
var errUnsupported = errors.New("the node agent needs a unix system")

func ownGroup(*exec.Cmd) {}

func signalGroup(*os.Process, syscall.Signal) error { return errUnsupported }

func lockFile(*os.File) error { return errUnsupported }
