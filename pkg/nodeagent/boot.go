package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
)

// DefaultNodeup is the nodeup step of a real machine: starting the kubelet unit
// the renderer configured (it is not enabled, so only the boot starts it).
var DefaultNodeup = []string{"systemctl", "start", "kubelet.service"}

// BootOptions configure Boot.
type BootOptions struct {
	// Agent configures the agent that runs both phases. Its SyncDone is Boot's.
	Agent Options
	// Nodeup is the command that starts the node (the kubelet) between the phases,
	// run with the root as working directory. Default DefaultNodeup.
	Nodeup []string
	// NodeupTimeout bounds Nodeup. Default 5m.
	NodeupTimeout time.Duration
}

// BootResult is what Boot did.
type BootResult struct {
	// Reports of the phases that ran, in order.
	Reports []*Report `json:"reports"`
	// NodeupStarted is when the nodeup command started; nil when it did not run.
	NodeupStarted *time.Time `json:"nodeupStarted,omitempty"`
}

// Boot is a machine's boot, as the rendered kubeplug-boot.service runs it: the
// beforeNodeup phase, the nodeup command (the kubelet), then the afterNodeup phase.
//
// The behaviours hold as on the local provider: the nodeup command starts as soon
// as beforeNodeup's sync hooks have ended (async hooks keep running alongside the
// kubelet and afterNodeup) and only if no enforced hook failed by then. A hook's
// timeout is its own. After an enforced failure the kubelet is not started;
// hookspec.FailedMarkerPath then holds why and the error names the hook. Boot returns once
// every hook of both phases has ended, so an async-enforce failure that comes after
// the kubelet started still fails the node (marker and error); the kubelet is left
// running then, as a failed node is for the operator to drain, not for the boot.
func Boot(ctx context.Context, opts BootOptions) (*BootResult, error) {
	if len(opts.Nodeup) == 0 {
		opts.Nodeup = DefaultNodeup
	}
	if opts.NodeupTimeout <= 0 {
		opts.NodeupTimeout = 5 * time.Minute
	}
	probe, err := New(opts.Agent)
	if err != nil {
		return nil, err
	}
	root := probe.opts.Root
	log := probe.opts.Logger
	marker := filepath.Join(root, filepath.FromSlash(hookspec.FailedMarkerPath))
	if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("clear %s: %w", marker, err)
	}
	res := &BootResult{}
	fail := func(err error) error {
		lines := []string{}
		for _, e := range flatten(err) {
			lines = append(lines, e.Error())
		}
		if werr := os.MkdirAll(filepath.Dir(marker), 0o755); werr == nil {
			werr = os.WriteFile(marker, []byte(strings.Join(lines, "\n")+"\n"), 0o644) //nolint:gosec // the reason is for the operator to read
			if werr != nil {
				err = errors.Join(err, fmt.Errorf("mark the node failed: %w", werr))
			}
		}
		log.Error("node failed", "marker", marker, "error", err)
		return err
	}

	// Each phase runs to its end in the background; the boot moves on at its SyncDone.
	type phaseRun struct {
		held chan error // receives SyncDone's argument, or Run's error when it never came
		done chan struct{}
		rep  *Report
		err  error
	}
	start := func(phase string) *phaseRun {
		pr := &phaseRun{held: make(chan error, 1), done: make(chan struct{})}
		ao := opts.Agent
		ao.SyncDone = func(enforced error) { pr.held <- enforced }
		go func() {
			defer close(pr.done)
			a, err := New(ao)
			if err == nil {
				pr.rep, pr.err = a.Run(ctx, phase)
			} else {
				pr.err = err
			}
			select {
			case pr.held <- pr.err: // SyncDone never came
			default:
			}
		}()
		return pr
	}
	finish := func(runs ...*phaseRun) error {
		var errs []error
		for _, pr := range runs {
			<-pr.done
			if pr.rep != nil {
				res.Reports = append(res.Reports, pr.rep)
			}
			errs = append(errs, pr.err)
		}
		return errors.Join(errs...)
	}

	before := start(hookspec.PhaseBeforeNodeup)
	if held := <-before.held; held != nil {
		// The kubelet must not start; the async hooks under way still end. Run's
		// error holds every enforced failure, held's included.
		err := finish(before)
		if err == nil {
			err = held
		}
		return res, fail(err)
	}
	log.Info("nodeup", "argv", opts.Nodeup)
	now := time.Now().UTC()
	res.NodeupStarted = &now
	nctx, cancel := context.WithTimeout(ctx, opts.NodeupTimeout)
	cmd := exec.CommandContext(nctx, opts.Nodeup[0], opts.Nodeup[1:]...) //nolint:gosec // the nodeup command is the machine's configuration
	cmd.Dir = root
	out, nerr := cmd.CombinedOutput()
	cancel()
	if nerr != nil {
		nerr = fmt.Errorf("nodeup %s: %w: %s", strings.Join(opts.Nodeup, " "), nerr, strings.TrimSpace(string(out)))
		return res, fail(errors.Join(nerr, finish(before)))
	}
	after := start(hookspec.PhaseAfterNodeup)
	if err := finish(before, after); err != nil {
		return res, fail(err)
	}
	return res, nil
}

// flatten lists the leaves of an error joined with errors.Join.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}
