package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// The parent-death signal (PR_SET_PDEATHSIG) is delivered when the *thread* that
// forked the child exits, not the process. Go moves goroutines between threads
// and retires idle threads, so a child started from an ordinary goroutine could
// be SIGKILLed at a random moment. All children are therefore forked from one
// goroutine that locks its OS thread and never returns: that thread lives exactly
// as long as the process, and the signal fires when the process dies, including
// by SIGKILL.
var spawner struct {
	once sync.Once
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd  *exec.Cmd
	errc chan<- error
}

// startFromLockedThread starts cmd on the spawner thread.
func startFromLockedThread(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive every child
			for r := range spawner.reqs {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawner.reqs <- spawnRequest{cmd: cmd, errc: errc}
	return <-errc
}

// process is one running component.
type process struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has been reaped
	err  error         // exit error; valid after done is closed
}

// startProcess starts bin with args in a new process group, with its output
// appended to logPath.
func startProcess(bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", logPath, err)
	}
	_, _ = fmt.Fprintf(logFile, "\n=== kubeplug controlplane: starting %s at %s\n", bin, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(bin, args...) //nolint:gosec // bin comes from the located binary directory
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = os.Environ()
	cmd.SysProcAttr = sysProcAttr()
	if err := startFromLockedThread(cmd); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// pid is also the process group id (Setpgid with Pgid 0).
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, waits up to grace (or until ctx is
// done) and then SIGKILLs the group. It always waits for the process to be
// reaped, and it also kills any straggler left in the group after the leader
// exited.
func (p *process) stop(ctx context.Context, grace time.Duration) error {
	pgid := p.pid()
	if exited, _ := p.exited(); !exited {
		if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal process group %d: %w", pgid, err)
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-p.done:
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", pgid, err)
	}
	<-p.done // SIGKILL cannot be ignored; reaping is immediate
	return nil
}
