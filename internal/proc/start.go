package proc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// Start starts the command that command returns, retrying briefly on ETXTBSY:
// another goroutine may fork while a private copy (Private) is still open for
// writing, and its child holds that descriptor until it execs (golang/go#22315).
// command must return a new, unstarted command each time.
func Start(ctx context.Context, command func() *exec.Cmd) (*exec.Cmd, error) {
	for delay := time.Millisecond; ; delay *= 2 {
		cmd := command()
		err := cmd.Start()
		if err == nil {
			return cmd, nil
		}
		if !errors.Is(err, syscall.ETXTBSY) || delay > 200*time.Millisecond {
			return nil, fmt.Errorf("start %s: %w", cmd.Args[0], err)
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(delay):
		}
	}
}
