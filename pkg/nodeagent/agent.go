package nodeagent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kubeplug/kubeplug/internal/proc"
	"github.com/kubeplug/kubeplug/pkg/hookspec"
)

// The agent's own paths on a machine, relative to its root. The manifest and the
// scripts it reads are at hookspec.HooksManifestPath and under hookspec.HooksDir.
const (
	// ReportsDir holds one report per phase, <phase>.json, rewritten by every run.
	ReportsDir = "/var/lib/kubeplug/reports"
	// StateDir holds one file per phase recording the hooks that succeeded.
	StateDir = "/var/lib/kubeplug/state"
	// CacheDir holds the scripts of url hooks, one file per sha256 digest, so that a
	// re-run or a second hook with the same script does not download it again.
	CacheDir = "/var/lib/kubeplug/cache"
)

// Options configure an Agent. The zero value runs the machine's own hooks at "/".
type Options struct {
	// Root is the directory every machine path is relative to: the manifest, the
	// scripts, the reports and the state, and the hooks' working directory. Default "/".
	// A test or the local provider gives each simulated node a root of its own.
	Root string
	// Logger receives progress; default discards.
	Logger *slog.Logger
	// Cluster and Node are the facts conditions see. Fields left empty are taken from
	// the manifest's cluster and node objects; Node.Name defaults to the host name.
	Cluster hookspec.Cluster
	Node    hookspec.Node
	// ReportDir receives <phase>.json after every run. Default Root+ReportsDir.
	ReportDir string
	// StateDir holds <phase>.json with the hooks that succeeded, and <phase>.lock.
	// Default Root+StateDir.
	StateDir string
	// Force runs hooks that already succeeded in an earlier run of the phase.
	Force bool
	// OutputTail is how many bytes of each of a hook's stdout and stderr are kept.
	// Default 4096.
	OutputTail int
	// Sandbox, when set, is an argv prefix every hook runs through (the hook's
	// own argv follows it): the local provider's simulated nodes run their
	// hooks in a mount and pid namespace of their own where everything but
	// Root is read-only (SandboxArgv). Empty on a real machine.
	Sandbox []string
	// KillGrace is how long a timed-out or canceled hook's group has between SIGTERM
	// and SIGKILL. Default 5s.
	KillGrace time.Duration
	// Manifest is the hooks manifest to run. Default Root+HooksManifestPath.
	Manifest string
	// CacheDir keeps downloaded hook scripts by digest. Default Root+CacheDir.
	CacheDir string
	// FetchTimeout bounds the download of one url hook's script, so that an
	// unreachable URL fails the hook instead of hanging the boot. Default 2m.
	FetchTimeout time.Duration
	// HTTPClient downloads https:// hooks. Default http.DefaultClient; a test passes
	// an httptest server's client.
	HTTPClient *http.Client
	// S3Endpoint, when set, is the URL of an S3-compatible store that s3:// hooks are
	// read from, addressed path-style (http://127.0.0.1:9000/bucket/key). Empty means
	// AWS S3 in the configured region. s3:// URLs are read only by a program
	// that links package s3fetch.
	S3Endpoint string
	// SyncDone, when set, is called once per Run, as soon as the phase no longer
	// holds the boot: every sync hook has ended and no further hook will start
	// except async ones already under way, which Run still waits for. enforced
	// joins the *HookError of every enforced hook that failed so far (every sync
	// one, and async ones that already ended); nil means what comes after the phase
	// (the kubelet, for beforeNodeup) may start. It is called before Run returns,
	// also when the phase had no hooks or a canceled context stopped it. Boot uses
	// it so that async hooks do not hold up the boot. It is not called when Run
	// fails before considering any hook (a bad manifest, a held lock).
	SyncDone func(enforced error)
}

// Agent runs a machine's node hooks, one phase per Run. It is safe for concurrent
// Runs of different phases; a second Run of the same phase and root fails at once.
type Agent struct {
	opts  Options
	fetch *fetcher
}

// New checks opts and fills in its defaults.
func New(opts Options) (*Agent, error) {
	if opts.Root == "" {
		opts.Root = "/"
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("node agent root %q: %w", opts.Root, err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("node agent root: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("node agent root %s: not a directory", root)
	}
	opts.Root = root
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReportDir == "" {
		opts.ReportDir = opts.path(ReportsDir)
	}
	if opts.StateDir == "" {
		opts.StateDir = opts.path(StateDir)
	}
	if opts.OutputTail <= 0 {
		opts.OutputTail = 4096
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = 5 * time.Second
	}
	if opts.Manifest == "" {
		opts.Manifest = opts.path(hookspec.HooksManifestPath)
	}
	if opts.CacheDir == "" {
		opts.CacheDir = opts.path(CacheDir)
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = 2 * time.Minute
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	a := &Agent{opts: opts}
	a.fetch = &fetcher{dir: opts.CacheDir, opts: &a.opts}
	return a, nil
}

// path maps a machine path under the root.
func (o *Options) path(p string) string { return filepath.Join(o.Root, filepath.FromSlash(p)) }

// HookError is an enforced hook's failure: the node has failed.
type HookError struct {
	Phase, Node, Plugin, Hook string
	Status                    Status
	// Reason is the cause, like "exit status 3" or "timed out after 2m".
	Reason string
}

func (e *HookError) Error() string {
	return fmt.Sprintf("hook %s of plugin %s %s in phase %s on node %s: %s", e.Hook, e.Plugin, e.Status, e.Phase, e.Node, e.Reason)
}

// ErrLocked is returned when another agent is running the same phase on the root.
var ErrLocked = errors.New("another node agent is running this phase")

// Run runs the phase's hooks and returns what happened.
//
// The hooks run in manifest order, except that a hook waits for the hooks it requires
// and for those that name it in before (a topological order; the manifest's order
// breaks ties). A sync hook finishes before the next hook starts; an async hook
// starts and the next hook starts at once. Run waits for every async hook before it
// returns, so that its report is complete and nothing outlives the command that
// started it. A hook whose condition is false, or that succeeded in an earlier run
// with the same definition (with any definition, for a once hook), is skipped. A hook
// whose required hook failed, was skipped for its condition or did not run is not
// run; one that succeeded in an earlier run counts as succeeded. After a sync-enforce
// failure no further hook starts. Each hook runs in its own process group, which is
// killed on timeout or when ctx is canceled.
//
// The error is a *ManifestError when nothing could run (wrapping a *CycleError for
// hooks that order each other in a loop); errors.Join of *HookError for every
// enforced failure; or wraps ctx.Err() when canceled. The report, written to
// ReportDir/<phase>.json, is returned whenever hooks were considered, also with an error.
func (a *Agent) Run(ctx context.Context, phase string) (*Report, error) {
	if !slices.Contains(hookspec.Phases, phase) {
		return nil, fmt.Errorf("phase %q: expected one of %s", phase, strings.Join(hookspec.Phases, ", "))
	}
	unlock, err := a.lock(phase)
	if err != nil {
		return nil, err
	}
	defer unlock()

	manifestPath := a.opts.Manifest
	m, err := hookspec.ReadManifest(manifestPath)
	if err != nil {
		return nil, err
	}
	cluster, node := a.facts(m)
	st, err := readState(filepath.Join(a.opts.StateDir, phase+".json"))
	if err != nil {
		return nil, err
	}
	log := a.opts.Logger.With("phase", phase, "node", node.Name)

	hooks, deps, err := hookspec.Schedule(phaseHooks(m.Hooks, phase))
	if err != nil {
		return nil, &hookspec.ManifestError{Path: manifestPath, Err: fmt.Errorf("phase %s: %w", phase, err)}
	}
	index := make(map[string]int, len(hooks))
	for i := range hooks {
		index[hooks[i].ID()] = i
	}

	rep := &Report{Phase: phase, Node: node.Name, Root: a.opts.Root, StartedAt: time.Now().UTC(), Hooks: make([]HookResult, len(hooks))}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		stopped string // why no further hook starts; under mu
		errs    = make([]error, len(hooks))
		// done[i] is closed once hook i's result is final; succeeded[i] is then
		// whether it succeeded, now or in an earlier run.
		done      = make([]chan struct{}, len(hooks))
		succeeded = make([]bool, len(hooks))
	)
	for i := range done {
		done[i] = make(chan struct{})
	}
	stop := func(why string) string {
		mu.Lock()
		defer mu.Unlock()
		if stopped == "" {
			stopped = why
		}
		return stopped
	}
	// one decides and runs hook i, from the loop for a sync hook, else alongside.
	one := func(i int) {
		defer close(done[i])
		h, res := &hooks[i], &rep.Hooks[i]
		*res = HookResult{Plugin: h.Plugin, Name: h.Name, Behavior: h.Behavior}
		for _, j := range deps[i] {
			select {
			case <-done[j]:
			case <-ctx.Done():
			}
		}
		why := ""
		if ctx.Err() != nil {
			why = stop("the run was canceled")
		} else {
			why = stop("")
		}
		if why == "" {
			why = unmet(h, index, succeeded, rep)
		}
		if why != "" {
			res.Status, res.Reason = StatusNotRun, why
			log.Info("hook not run", "plugin", h.Plugin, "hook", h.Name, "reason", why)
			return
		}
		run, ok := a.admit(ctx, h, res, st, cluster, node, log)
		if run {
			a.runHook(ctx, phase, h, node.Name, res, st, log)
			ok = res.Status == StatusSucceeded
		}
		succeeded[i] = ok
		if res.Status.Failed() && h.Enforce() {
			mu.Lock()
			errs[i] = hookError(phase, node.Name, h, res)
			mu.Unlock()
			if h.Sync() {
				stop("hook " + h.ID() + " failed before it")
			}
		}
	}
	for i := range hooks {
		if hooks[i].Sync() {
			one(i)
			continue
		}
		wg.Go(func() { one(i) })
	}
	if a.opts.SyncDone != nil {
		mu.Lock()
		held := errors.Join(errs...)
		mu.Unlock()
		if cerr := ctx.Err(); cerr != nil && held == nil {
			held = fmt.Errorf("run phase %s on node %s: %w", phase, node.Name, cerr)
		}
		a.opts.SyncDone(held)
	}
	wg.Wait()
	return rep, a.finish(ctx, rep, errors.Join(errs...), node.Name)
}

// phaseHooks are the hooks of phase, in manifest order, and the phases of
// the others by hook ID.
func phaseHooks(all []hookspec.Hook, phase string) (hooks []hookspec.Hook, elsewhere map[string]string) {
	elsewhere = map[string]string{}
	for _, h := range all {
		if h.At == phase {
			hooks = append(hooks, h)
		} else {
			elsewhere[h.ID()] = h.At
		}
	}
	return hooks, elsewhere
}

// finish completes the report of a run whose enforced failures are err, with
// ctx's error when it was canceled, and writes it to ReportDir; it returns
// the run's error.
func (a *Agent) finish(ctx context.Context, rep *Report, err error, node string) error {
	rep.FinishedAt = time.Now().UTC()
	rep.Failed = err != nil
	if cerr := ctx.Err(); cerr != nil {
		err = errors.Join(fmt.Errorf("run phase %s on node %s: %w", rep.Phase, node, cerr), err)
	}
	if err != nil {
		rep.Error = err.Error()
	}
	if werr := writeJSON(filepath.Join(a.opts.ReportDir, rep.Phase+".json"), rep); werr != nil {
		err = errors.Join(err, fmt.Errorf("write the report: %w", werr))
	}
	return err
}

// unmet says why h cannot run for its requires, or "" when every hook it requires
// succeeded. The required hooks have ended: they are among h's dependencies.
func unmet(h *hookspec.Hook, index map[string]int, succeeded []bool, rep *Report) string {
	for _, r := range h.Requires {
		id := h.Ref(r)
		j, ok := index[id]
		switch {
		case !ok:
			return "requires " + id + ", which is not on this machine"
		case !succeeded[j]:
			return "requires " + id + ", which " + rep.Hooks[j].Status.phrase()
		}
	}
	return ""
}

func hookError(phase, node string, h *hookspec.Hook, res *HookResult) error {
	return &HookError{Phase: phase, Node: node, Plugin: h.Plugin, Hook: h.Name, Status: res.Status, Reason: res.Reason}
}

// lock keeps a second agent off the phase until the first one is done.
func (a *Agent) lock(phase string) (func(), error) {
	if err := os.MkdirAll(a.opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("lock phase %s: %w", phase, err)
	}
	file := filepath.Join(a.opts.StateDir, phase+".lock")
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR, 0o644) //nolint:gosec // the state directory is the agent's configuration
	if err != nil {
		return nil, fmt.Errorf("lock phase %s: %w", phase, err)
	}
	if err := lockFile(f); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", file, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", file, err)
	}
	return func() { _ = f.Close() }, nil
}

// facts merges the options' facts over the manifest's.
func (a *Agent) facts(m *hookspec.Manifest) (hookspec.Cluster, hookspec.Node) {
	c, n := a.opts.Cluster, a.opts.Node
	if m.Cluster != nil {
		c.Name = cmp(c.Name, m.Cluster.Name)
		c.KubernetesVersion = cmp(c.KubernetesVersion, m.Cluster.KubernetesVersion)
	}
	if m.Node != nil {
		n.Name = cmp(n.Name, m.Node.Name)
		n.Pool = cmp(n.Pool, m.Node.Pool)
		n.Role = cmp(n.Role, m.Node.Role)
		if n.Labels == nil {
			n.Labels = m.Node.Labels
		}
	}
	if n.Name == "" {
		n.Name, _ = os.Hostname()
	}
	return c, n
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// admit decides whether h runs; when not, it fills res, and done says whether h
// succeeded in an earlier run, which satisfies the hooks that require it.
func (a *Agent) admit(ctx context.Context, h *hookspec.Hook, res *HookResult, st *state, cluster hookspec.Cluster, node hookspec.Node, log *slog.Logger) (run, done bool) {
	if h.Once && st.succeeded(h.ID()) {
		// Neither a new definition nor Force: a once hook does what must not be done
		// twice, like formatting a disk.
		res.Status, res.Reason = StatusSkipped, "a once hook, succeeded in an earlier run"
		log.Info("hook skipped", "plugin", h.Plugin, "hook", h.Name, "reason", res.Reason)
		return false, true
	}
	if h.When != "" {
		c, err := hookspec.CompileCondition(h.When)
		if err != nil {
			res.Status, res.Reason = StatusFailed, err.Error()
			log.Warn("hook condition invalid", "plugin", h.Plugin, "hook", h.Name, "error", err)
			return false, false
		}
		res.Warning = c.Warning()
		if res.Warning != "" {
			log.Warn("hook condition compares versions as strings", "plugin", h.Plugin, "hook", h.Name, "when", h.When)
		}
		ok, err := c.Eval(ctx, cluster, node)
		if err != nil {
			res.Status, res.Reason = StatusFailed, fmt.Sprintf("%v (when %q)", err, h.When)
			log.Warn("hook condition failed", "plugin", h.Plugin, "hook", h.Name, "error", err)
			return false, false
		}
		if !ok {
			res.Status, res.Reason = StatusSkipped, fmt.Sprintf("when %q is false", h.When)
			log.Info("hook skipped", "plugin", h.Plugin, "hook", h.Name, "reason", res.Reason)
			return false, false
		}
	}
	if !a.opts.Force && st.done(h.ID(), a.digest(h)) {
		res.Status, res.Reason = StatusSkipped, "succeeded in an earlier run"
		log.Info("hook skipped", "plugin", h.Plugin, "hook", h.Name, "reason", res.Reason)
		return false, true
	}
	return true, false
}

// digest identifies what a hook runs: its entry and its script's content. A new
// render that changes either makes the hook run again.
func (a *Agent) digest(h *hookspec.Hook) string {
	s := sha256.New()
	b, _ := json.Marshal(h) //nolint:errchkjson // a Hook always encodes
	s.Write(b)
	if h.Script != "" {
		if sb, err := os.ReadFile(a.opts.path(h.Script)); err == nil {
			s.Write(sb)
		}
	}
	return "sha256:" + hex.EncodeToString(s.Sum(nil))
}

// argv is what the hook runs. A script, or the file a url hook downloaded (fetched),
// runs with the interpreter its #! line names, else /bin/sh, so that it needs no
// executable bit and its path maps under the root.
func (a *Agent) argv(h *hookspec.Hook, fetched string) ([]string, error) {
	file := fetched
	if file == "" {
		if h.Script == "" || (len(h.Command) > 0 && !slices.Equal(h.Command, []string{h.Script})) {
			return h.Command, nil
		}
		file = a.opts.path(h.Script)
	}
	f, err := os.Open(file) //nolint:gosec // the script's path is checked against hookspec.HooksDir
	if err != nil {
		return nil, fmt.Errorf("open the hook's script: %w", err)
	}
	defer func() { _ = f.Close() }()
	line, _ := bufio.NewReader(f).ReadString('\n')
	if interp, ok := strings.CutPrefix(line, "#!"); ok {
		if fields := strings.Fields(interp); len(fields) > 0 {
			return append(fields, file), nil
		}
	}
	return []string{"/bin/sh", file}, nil
}

// runHook runs h and fills res; a success is recorded in st.
func (a *Agent) runHook(ctx context.Context, phase string, h *hookspec.Hook, node string, res *HookResult, st *state, log *slog.Logger) {
	log = log.With("plugin", h.Plugin, "hook", h.Name)
	res.StartedAt = time.Now().UTC()
	defer func() { res.Duration = Duration(time.Since(res.StartedAt)) }()
	fetched := ""
	if h.URL != "" {
		var err error
		if fetched, err = a.fetch.fetch(ctx, h.URL, h.SHA256); err != nil {
			res.Status, res.Reason = StatusFailed, err.Error()
			if ctx.Err() != nil {
				res.Status = StatusCanceled
			}
			log.Warn("hook failed", "reason", res.Reason)
			return
		}
	}
	argv, err := a.argv(h, fetched)
	if err != nil {
		res.Status, res.Reason = StatusFailed, err.Error()
		return
	}
	if len(a.opts.Sandbox) > 0 {
		argv = append(slices.Clone(a.opts.Sandbox), argv...)
	}
	stdout, stderr := newTail(a.opts.OutputTail), newTail(a.opts.OutputTail)
	cmd := exec.Command(argv[0], argv[1:]...) //nolint:gosec // running the machine's hooks is the agent's purpose
	cmd.Dir = a.opts.Root
	// Marks the hook's processes, those that leave its group included.
	contained := proc.NewContainment()
	cmd.Env = append(os.Environ(), contained.Env(),
		"KUBEPLUG_ROOT="+a.opts.Root,
		"KUBEPLUG_PHASE="+phase,
		"KUBEPLUG_PLUGIN="+h.Plugin,
		"KUBEPLUG_HOOK="+h.Name,
		"KUBEPLUG_NODE="+node,
	)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A hook may leave a background child holding its output open; do not wait for it.
	cmd.WaitDelay = time.Second
	ownGroup(cmd)
	log.Info("hook started", "argv", argv)
	if err := cmd.Start(); err != nil {
		res.Status, res.Reason = StatusFailed, fmt.Sprintf("start: %v", err)
		log.Warn("hook failed", "reason", res.Reason)
		return
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(h.TimeoutOrDefault())
	defer timer.Stop()
	select {
	case err = <-done:
	case <-timer.C:
		res.Status, res.Reason = StatusTimedOut, "timed out after "+h.TimeoutOrDefault().String()
		err = a.kill(cmd, done)
	case <-ctx.Done():
		res.Status, res.Reason = StatusCanceled, "canceled: "+context.Cause(ctx).Error()
		err = a.kill(cmd, done)
	}
	if h.Sync() {
		sweep(cmd, contained, res, log)
	}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	code := cmd.ProcessState.ExitCode()
	res.ExitCode = &code
	if res.Status == "" {
		if err != nil {
			res.Status, res.Reason = StatusFailed, err.Error()
		} else {
			res.Status = StatusSucceeded
		}
	}
	a.recordOutcome(h, res, st, log)
}

// sweep ends what a sync hook left running (`daemon &`, `setsid daemon`), and
// res says so: a sync hook's run is its processes' lifetime. An async hook's
// children are its own business.
func sweep(cmd *exec.Cmd, contained *proc.Containment, res *HookResult, log *slog.Logger) {
	left := contained.Sweep()
	_ = signalGroup(cmd.Process, syscall.SIGKILL)
	if len(left) > 0 {
		msg := proc.Describe(left)
		res.Warning = strings.TrimPrefix(res.Warning+"; ", "; ") + msg
		log.Warn("hook left processes behind", "ended", msg)
	}
}

// recordOutcome records in st that h succeeded, so that the next run skips
// it, or forgets an earlier success when it did not.
func (a *Agent) recordOutcome(h *hookspec.Hook, res *HookResult, st *state, log *slog.Logger) {
	if res.Status != StatusSucceeded {
		if err := st.forget(h.ID()); err != nil {
			log.Warn("hook state not updated", "error", err)
		}
		log.Warn("hook failed", "status", res.Status, "reason", res.Reason)
		return
	}
	if err := st.record(h.ID(), a.digest(h), time.Now()); err != nil {
		// The hook ran; only the next run's skip is lost.
		res.Warning = strings.TrimPrefix(res.Warning+"; ", "; ") + "not recorded as succeeded: " + err.Error()
	}
	log.Info("hook succeeded", "duration", time.Since(res.StartedAt))
}

// kill ends the hook's group: SIGTERM, then SIGKILL after the grace period. It
// returns Wait's error.
func (a *Agent) kill(cmd *exec.Cmd, done <-chan error) error {
	_ = signalGroup(cmd.Process, syscall.SIGTERM)
	grace := time.NewTimer(a.opts.KillGrace)
	defer grace.Stop()
	var err error
	select {
	case err = <-done:
	case <-grace.C:
		_ = signalGroup(cmd.Process, syscall.SIGKILL)
		err = <-done
	}
	// The leader may have exited on SIGTERM while a child ignored it.
	_ = signalGroup(cmd.Process, syscall.SIGKILL)
	return err
}

// tail keeps the last n bytes written to it.
type tail struct {
	mu  sync.Mutex
	n   int
	buf []byte
	cut bool
}

var _ io.Writer = (*tail)(nil)

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.n; over > 0 {
		t.buf = slices.Clone(t.buf[over:])
		t.cut = true
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(bytes.ToValidUTF8(t.buf, []byte("\uFFFD")))
	if t.cut {
		return "…" + s
	}
	return s
}
