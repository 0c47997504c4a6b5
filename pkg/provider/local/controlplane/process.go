package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// process is one running component: a child this process started (cmd set), or
// one recorded in state.json by another process that Attach found alive (cmd nil,
// identified by pid and start time, so a reused pid is not mistaken for it).
type process struct {
	cmd       *exec.Cmd
	pidv      int
	startTime uint64        // kernel start time in clock ticks; 0 when unknown
	log       *os.File      // nil for an attached process
	done      chan struct{} // closed when the process has been reaped; nil when attached
	err       error         // exit error; valid after done is closed
}

// startProcess starts bin with args in a new process group, with its output
// appended to logPath. A detached process gets a session of its own and no
// parent-death signal, so it outlives the caller.
func startProcess(bin string, args []string, logPath string, detach bool) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) //nolint:gosec // the log lives in the data directory
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", logPath, err)
	}
	_, _ = fmt.Fprintf(logFile, "\n=== kubeplug controlplane: starting %s at %s\n", bin, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(bin, args...) //nolint:gosec // bin comes from the located binary directory
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = os.Environ()
	if detach {
		// Not the caller's working directory, which may be removed while the
		// component runs on.
		cmd.Dir = filepath.Dir(logPath)
		cmd.SysProcAttr = detachedSysProcAttr()
		err = cmd.Start()
	} else {
		cmd.SysProcAttr = sysProcAttr()
		err = startFromLockedThread(cmd)
	}
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, pidv: cmd.Process.Pid, log: logFile, done: make(chan struct{})}
	p.startTime, _ = procStartTime(p.pidv)
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// pid is also the process group id (Setpgid with Pgid 0, or Setsid).
func (p *process) pid() int { return p.pidv }

// exited reports whether the process has exited, and how. For an attached
// process the exit status is unknown.
func (p *process) exited() (bool, error) {
	if p.done == nil {
		if processAlive(p.pidv, p.startTime) {
			return false, nil
		}
		return true, errors.New("exited (not a child of this process: status unknown)")
	}
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// wait waits until the process is gone or timeout passes or ctx is done, and
// reports whether it is gone.
func (p *process) wait(ctx context.Context, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	if p.done != nil {
		select {
		case <-p.done:
			return true
		case <-timer.C:
		case <-ctx.Done():
		}
		return false
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if exited, _ := p.exited(); exited {
			return true
		}
		select {
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM to the process group, waits up to grace (or until ctx is
// done) and then SIGKILLs the group. It always waits for the process to be
// reaped (an attached process: to be gone, at most killWait), and it also kills
// any straggler left in the group after the leader exited.
func (p *process) stop(ctx context.Context, grace time.Duration) error {
	pgid := p.pid()
	if exited, _ := p.exited(); !exited {
		if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal process group %d: %w", pgid, err)
		}
		p.wait(ctx, grace)
	} else if p.done == nil {
		// An attached leader that is gone: its group id may belong to a new
		// process group by now, so do not signal it.
		return nil
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", pgid, err)
	}
	if p.done != nil {
		<-p.done // SIGKILL cannot be ignored; reaping is immediate
		return nil
	}
	if !p.wait(context.WithoutCancel(ctx), killWait) {
		return fmt.Errorf("process %d still alive %s after SIGKILL", pgid, killWait)
	}
	return nil
}

// killWait bounds the wait for an attached process to disappear after SIGKILL;
// its parent (init, or the process that started it) reaps it.
const killWait = 10 * time.Second
