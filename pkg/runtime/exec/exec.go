package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/proc"
	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime/protocol"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Defaults.
const (
	// DefaultTimeout bounds one stage call when spec.runtime.timeout is unset.
	DefaultTimeout = time.Minute
	// DefaultMaxOutput caps a plugin's stdout.
	DefaultMaxOutput = 16 << 20
	// waitDelay is how long Run waits for the output pipes to close after the
	// process ended or was killed, in case something outside its group holds them.
	waitDelay = 2 * time.Second
)

// Errors that Run wraps, for callers that tell failures apart with errors.Is.
var (
	// ErrTimeout: the call ran past its timeout and the process group was killed.
	ErrTimeout = errors.New("timed out")
	// ErrExit: the process exited with a non-zero status or was killed by a signal.
	ErrExit = errors.New("plugin process failed")
	// ErrOutputTooLarge: stdout exceeded the cap and the process group was killed.
	ErrOutputTooLarge = errors.New("output too large")
	// ErrProtocol: stdout was not a valid response.
	ErrProtocol = protocol.ErrProtocol
	// ErrDigestMismatch: the executable is not the one plugin.yaml pins; it was not run.
	ErrDigestMismatch = proc.ErrDigestMismatch
)

// DigestError says which digest was expected and which was found.
type DigestError = proc.DigestError

// Options configure exec runtimes. The zero value is ready to use.
type Options struct {
	// Logger receives the plugin's stderr, one record per line with plugin=NAME;
	// discarded when nil.
	Logger *slog.Logger
	// Timeout, when positive, overrides spec.runtime.timeout for every stage call.
	Timeout time.Duration
	// MaxOutput caps stdout in bytes; DefaultMaxOutput when zero.
	MaxOutput int64
	// Env is added to the plugin's environment, which otherwise holds only PATH,
	// HOME, TMPDIR, the locale and KUBEPLUG_PLUGIN, KUBEPLUG_STAGE and
	// KUBEPLUG_PROTOCOL.
	Env []string
}

// Runtime runs one package's exec runtime.
type Runtime struct {
	pkg     *plugin.Package
	argv    []string
	timeout time.Duration
	dir     string
	opts    Options
	log     *slog.Logger
	// bin is the executable, verified at the first call and copied once.
	bin *proc.Pinned
}

var (
	_ stage.Runtime = (*Runtime)(nil)
	_ io.Closer     = (*Runtime)(nil)
)

// New returns the runtime of pkg's spec.runtime, which must be of type exec. It
// checks the spec but reads and runs nothing. The caller closes it.
func New(pkg *plugin.Package, opts Options) (*Runtime, error) {
	spec := pkg.Manifest.Spec.Runtime
	if spec == nil || spec.Type != v1alpha1.RuntimeExec {
		return nil, fmt.Errorf("plugin %s has no exec runtime", pkg.Name)
	}
	timeout, err := Timeout(spec, opts.Timeout)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", pkg.Name, err)
	}
	if len(spec.Command) == 0 {
		return nil, fmt.Errorf("plugin %s: spec.runtime.command is empty", pkg.Name)
	}
	cmd0, err := plugin.CleanRef(spec.Command[0])
	if err != nil {
		return nil, fmt.Errorf("plugin %s: spec.runtime.command[0]: %w", pkg.Name, err)
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	argv := append([]string{cmd0}, spec.Command[1:]...)
	return &Runtime{
		pkg: pkg, argv: argv, timeout: timeout, dir: proc.PackageDir(pkg.Location), opts: opts, log: log,
		bin: proc.NewPinned(pkg.FS, cmd0, spec.SHA256),
	}, nil
}

// Timeout returns the per-call timeout: override when positive, else
// spec.Timeout, else DefaultTimeout.
func Timeout(spec *v1alpha1.Runtime, override time.Duration) (time.Duration, error) {
	if override > 0 {
		return override, nil
	}
	if spec.Timeout == "" {
		return DefaultTimeout, nil
	}
	d, err := time.ParseDuration(spec.Timeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("spec.runtime.timeout: expected a positive Go duration such as 30s, found %q", spec.Timeout)
	}
	return d, nil
}

// Run runs one stage: it runs the executable's verified private copy (checking
// the digest and making the copy at the first call) with the request on stdin
// and decodes its stdout. A plugin that does not implement the stage yields a
// nil response. Cancelling ctx kills the process group and returns ctx's error.
// Calls may run concurrently.
func (r *Runtime) Run(ctx context.Context, req *stage.Request) (*stage.Response, error) {
	in, err := protocol.EncodeRequest(req)
	if err != nil {
		return nil, err
	}
	file, renewed, err := r.bin.Path()
	if err != nil {
		return nil, err
	}
	if renewed {
		r.log.Warn("the private copy of the plugin executable changed or vanished; it was verified and copied again",
			"plugin", r.pkg.Name, "executable", r.argv[0])
	}
	// The call's own directory: the plugin's TMPDIR, and its working directory
	// when the package has none on disk; removed, with what the plugin left
	// there, when the call ends.
	tmp, err := os.MkdirTemp("", "kubeplug-call-")
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.argv[0], err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	private, err := proc.PrivateTemp(tmp)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.argv[0], err)
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, r.timeout, ErrTimeout)
	defer cancelTimeout()

	secrets := redact.FromContext(ctx)
	stderr := proc.NewStderr(r.log, r.pkg.Name, "stage", string(req.Stage)).Scrub(secrets)
	stdout := &capped{max: r.opts.MaxOutput, full: func() { cancel(ErrOutputTooLarge) }}
	dir := r.dir
	if dir == "" {
		dir = tmp
	}
	contained := proc.NewContainment()
	own := []string{
		"KUBEPLUG_PLUGIN=" + r.pkg.Name, "KUBEPLUG_STAGE=" + string(req.Stage), "KUBEPLUG_PROTOCOL=" + protocol.Version, contained.Env(),
		"TMPDIR=" + private,
	}
	if req.Kubeconfig != "" {
		// The request's kubeconfig as a file too, for kubectl and client
		// libraries: beside TMPDIR, private to the call and removed with it.
		kc := filepath.Join(tmp, "kubeconfig")
		if err := os.WriteFile(kc, []byte(req.Kubeconfig), 0o600); err != nil {
			return nil, fmt.Errorf("run %s: %w", r.argv[0], err)
		}
		own = append(own, "KUBECONFIG="+kc)
	}
	env := proc.Env(append(own, r.opts.Env...)...)
	// The output pipes are ours rather than os/exec's, so that Wait returns when the
	// plugin exits even if a child it left behind still holds them: the group is
	// then killed and the readers see EOF.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.argv[0], err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_ = outR.Close()
		_ = outW.Close()
		return nil, fmt.Errorf("run %s: %w", r.argv[0], err)
	}
	command := func() *osexec.Cmd {
		cmd := osexec.CommandContext(ctx, file, r.argv[1:]...)
		cmd.Args[0] = r.argv[0]
		cmd.Dir, cmd.Env = dir, env
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), outW, errW
		proc.Isolate(cmd)
		cmd.Cancel = func() error { return proc.KillGroup(cmd.Process.Pid) }
		cmd.WaitDelay = waitDelay
		return cmd
	}
	cmd, err := proc.Start(ctx, command)
	_ = outW.Close()
	_ = errW.Close()
	var readers sync.WaitGroup
	readers.Go(func() { _, _ = io.Copy(stdout, outR) })
	readers.Go(func() { _, _ = io.Copy(stderr, errR) })
	if err == nil {
		err = cmd.Wait()
		// The plugin may have left children behind in its group even when it
		// exited cleanly; they must not outlive the call.
		_ = proc.KillGroup(cmd.Process.Pid)
	}
	// Nor may those that left the group (setsid, a double fork).
	if left := contained.Sweep(); len(left) > 0 {
		r.log.Warn("plugin left processes behind", "plugin", r.pkg.Name, "stage", req.Stage, "ended", proc.Describe(left))
	}
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(waitDelay):
		// Something that left the process group still holds the pipes.
	}
	_ = outR.Close()
	_ = errR.Close()
	<-drained
	resp, err := r.answer(ctx, err, stdout, stderr)
	// The error quotes what the plugin printed; it may echo a secret.
	return resp, secrets.Error(err)
}

// Close removes the executable's private copy. Call it when no call runs any
// more (the resolver does when the run ends); a later Run verifies and copies the
// package's executable again.
func (r *Runtime) Close() error { return r.bin.Close() }

func (r *Runtime) answer(ctx context.Context, runErr error, stdout *capped, stderr *proc.Stderr) (*stage.Response, error) {
	name := r.argv[0]
	fail := func(err error, format string, args ...any) error {
		return &Error{Err: err, Msg: fmt.Sprintf(format, args...), Stderr: stderr.Tail()}
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrOutputTooLarge):
		return nil, fail(ErrOutputTooLarge, "%s wrote more than %d bytes to stdout and was killed", name, r.opts.MaxOutput)
	case errors.Is(cause, ErrTimeout):
		return nil, fail(ErrTimeout, "%s did not answer within %s and was killed", name, r.timeout)
	case cause != nil:
		return nil, fail(cause, "%s was killed: %v", name, cause)
	}
	if runErr != nil {
		var exit *osexec.ExitError
		if !errors.As(runErr, &exit) {
			return nil, fail(runErr, "run %s: %v", name, runErr)
		}
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return nil, fail(ErrExit, "%s was killed by signal %s", name, ws.Signal())
		}
		if exit.ExitCode() == protocol.ExitUnsupported && stdout.buf.Len() == 0 {
			return nil, nil
		}
		return nil, fail(ErrExit, "%s exited with status %d", name, exit.ExitCode())
	}
	resp, err := protocol.DecodeResponse(stdout.buf.Bytes())
	if err != nil {
		return nil, fail(err, "%s: %v", name, err)
	}
	return resp, nil
}

// Error is a failed call: what happened and the tail of the plugin's stderr.
type Error struct {
	// Err is one of the package's sentinel errors or the underlying cause.
	Err error
	// Msg says what happened.
	Msg string
	// Stderr is the tail of the plugin's stderr.
	Stderr string
}

func (e *Error) Error() string { return proc.WithTail(e.Msg, e.Stderr) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// capped keeps up to max bytes and calls full once when more arrive. It keeps
// accepting (and dropping) writes so the process is killed, not blocked on a pipe.
type capped struct {
	buf    bytes.Buffer
	max    int64
	full   func()
	filled bool
}

func (c *capped) Write(p []byte) (int, error) {
	if c.filled {
		return len(p), nil
	}
	if int64(c.buf.Len()+len(p)) > c.max {
		c.filled = true
		c.full()
		return len(p), nil
	}
	return c.buf.Write(p)
}

var _ io.Writer = (*capped)(nil)
