package grpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	osexec "os/exec"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/proc"
	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	kexec "github.com/kubeplug/kubeplug/pkg/runtime/exec"
	"github.com/kubeplug/kubeplug/pkg/runtime/protocol"
	"github.com/kubeplug/kubeplug/pkg/runtime/wire"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// DefaultTimeout bounds one stage call, and the start of the process, when
// spec.runtime.timeout is unset.
const DefaultTimeout = kexec.DefaultTimeout

// Errors that Run wraps, for callers that tell failures apart with errors.Is.
var (
	// ErrTimeout: the call ran past its timeout; the process group was killed.
	ErrTimeout = kexec.ErrTimeout
	// ErrExit: the plugin process exited or could not be started.
	ErrExit = kexec.ErrExit
	// ErrProtocol: the plugin's answer or handshake broke the protocol.
	ErrProtocol = protocol.ErrProtocol
	// ErrPlugin: the plugin returned an error instead of an answer.
	ErrPlugin = errors.New("plugin returned an error")
	// ErrSDKVersion: the plugin was built with an SDK this host does not support.
	ErrSDKVersion = errors.New("unsupported SDK version")
	// ErrDigestMismatch: the executable is not the one plugin.yaml pins; it was not run.
	ErrDigestMismatch = proc.ErrDigestMismatch
)

// DigestError says which digest was expected and which was found.
type DigestError = proc.DigestError

// Error is a failed call: what happened and the tail of the plugin's stderr.
type Error = kexec.Error

// Options configure gRPC runtimes. The zero value is ready to use.
type Options struct {
	// Logger receives the plugin's stderr, one record per line with plugin=NAME;
	// discarded when nil.
	Logger *slog.Logger
	// Timeout, when positive, overrides spec.runtime.timeout for every stage call
	// and for the start of the process.
	Timeout time.Duration
	// Env is added to the plugin's environment, which otherwise holds only PATH,
	// HOME, TMPDIR, the locale, KUBEPLUG_PLUGIN and what go-plugin needs.
	Env []string
}

// Runtime runs one package's gRPC plugin process. It is safe for concurrent use.
// Close it when the run ends.
type Runtime struct {
	name    string
	fsys    fs.FS
	argv    []string
	sha256  string
	timeout time.Duration
	dir     string
	opts    Options
	stderr  *proc.Stderr

	mu sync.Mutex
	p  *process
}

// process is one started plugin.
type process struct {
	client *goplugin.Client
	rpc    *wire.Client
	cmd    *osexec.Cmd
	tmp    string
	// end ends the process's lifetime context, which kills its process group.
	end  context.CancelFunc
	once sync.Once
	// contained finds its descendants, in its group or not.
	contained *proc.Containment
}

var (
	_ stage.Runtime              = (*Runtime)(nil)
	_ interface{ Close() error } = (*Runtime)(nil)
)

// New returns the runtime of pkg's spec.runtime, which must be of type grpc. It
// checks the spec but starts nothing.
func New(pkg *plugin.Package, opts Options) (*Runtime, error) {
	spec := pkg.Manifest.Spec.Runtime
	if spec == nil || spec.Type != v1alpha1.RuntimeGRPC {
		return nil, fmt.Errorf("plugin %s has no grpc runtime", pkg.Name)
	}
	timeout, err := kexec.Timeout(spec, opts.Timeout)
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
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{
		name: pkg.Name, fsys: pkg.FS, argv: append([]string{cmd0}, spec.Command[1:]...), sha256: spec.SHA256,
		timeout: timeout, dir: proc.PackageDir(pkg.Location), opts: opts, stderr: proc.NewStderr(log, pkg.Name),
	}, nil
}

// Run runs one stage, starting the plugin process first if none is running. A
// plugin that does not implement the stage yields a nil response. The process
// lives until Close, until the context of the call that started it ends, or until
// a call times out or finds it dead; a later call then starts a new one.
func (r *Runtime) Run(ctx context.Context, req *stage.Request) (*stage.Response, error) {
	// What the plugin prints, and errors quoting it, may echo a secret.
	secrets := redact.FromContext(ctx)
	r.stderr.Scrub(secrets)
	resp, err := r.run(ctx, req)
	return resp, secrets.Error(err)
}

func (r *Runtime) run(ctx context.Context, req *stage.Request) (*stage.Response, error) {
	in, err := protocol.EncodeRequest(req)
	if err != nil {
		return nil, err
	}
	p, err := r.start(ctx)
	if err != nil {
		return nil, err
	}
	callCtx, cancel := context.WithTimeoutCause(ctx, r.timeout, ErrTimeout)
	defer cancel()
	out, err := p.rpc.Invoke(callCtx, wire.Method(req.Stage), in)
	if err != nil {
		return nil, r.failed(callCtx, p, req.Stage, err)
	}
	resp, err := protocol.DecodeResponse(out)
	if err != nil {
		return nil, &Error{Err: err, Msg: fmt.Sprintf("%s: %v", r.argv[0], err), Stderr: r.stderr.Tail()}
	}
	return resp, nil
}

// failed explains a failed call, killing the process unless the plugin itself
// answered with an error.
func (r *Runtime) failed(ctx context.Context, p *process, s stage.Stage, err error) error {
	fail := func(cause error, format string, args ...any) error {
		return &Error{Err: cause, Msg: fmt.Sprintf(format, args...), Stderr: r.stderr.Tail()}
	}
	st, _ := status.FromError(err)
	switch cause := context.Cause(ctx); {
	// The server enforces the deadline gRPC propagates, and may report it a
	// moment before the host's own timer fires.
	case errors.Is(cause, ErrTimeout), cause == nil && st.Code() == codes.DeadlineExceeded:
		r.drop(p)
		return fail(ErrTimeout, "%s did not answer %s within %s and was killed", r.argv[0], s, r.timeout)
	case cause != nil:
		r.drop(p)
		return fail(cause, "%s was stopped: %v", r.argv[0], cause)
	}
	if st.Code() == codes.Unknown {
		// The handler returned an error: the plugin is alive and said why.
		return fail(ErrPlugin, "%s: %s", ErrPlugin, st.Message())
	}
	// A transport failure: most likely the process died. Give go-plugin a moment
	// to notice, so the message can say so.
	for range 50 {
		if p.client.Exited() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	exited := p.client.Exited()
	r.drop(p)
	if exited {
		return fail(ErrExit, "%s exited during %s", r.argv[0], s)
	}
	return fail(ErrProtocol, "call %s on %s: %v", s, r.argv[0], err)
}

// start returns the running process, starting one if needed.
func (r *Runtime) start(ctx context.Context) (*process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p != nil {
		if !r.p.client.Exited() {
			return r.p, nil
		}
		r.p.kill(false)
		r.p = nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.stderr.Reset()
	bin, err := proc.Verified(r.fsys, r.argv[0], r.sha256)
	if err != nil {
		return nil, err
	}
	tmp, file, err := proc.Private(bin, r.argv[0])
	if err != nil {
		return nil, err
	}
	// The process's lifetime is the starting call's context: os/exec kills the
	// process group when it ends, which also aborts a start that hangs.
	life, end := context.WithCancel(ctx)
	cmd := osexec.CommandContext(life, file, r.argv[1:]...)
	cmd.Args[0] = r.argv[0]
	cmd.Dir = r.dir
	if cmd.Dir == "" {
		cmd.Dir = tmp
	}
	contained := proc.NewContainment()
	cmd.Env = proc.Env(append([]string{"KUBEPLUG_PLUGIN=" + r.name, contained.Env()}, r.opts.Env...)...)
	proc.Isolate(cmd)
	cmd.Cancel = func() error { return proc.KillGroup(cmd.Process.Pid) }
	sum, _ := hex.DecodeString(r.sha256) // the digest matched, so it is hex
	p := &process{cmd: cmd, tmp: tmp, end: end, contained: contained}
	p.client = goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{wire.ProtocolVersion: {wire.PluginName: &wire.Plugin{}}},
		Cmd:              cmd,
		// Checks the private copy again: defence in depth, and go-plugin's own
		// record that the executable was pinned.
		SecureConfig:     &goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()},
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		SkipHostEnv:      true,
		StartTimeout:     r.timeout,
		// Stderr is what the process writes to fd 2 (Go panics among it); after the
		// SDK starts serving, os.Stdout and os.Stderr reach the host through
		// go-plugin's stdio stream instead. All of it is the plugin's log.
		Stderr:     r.stderr,
		SyncStderr: r.stderr,
		SyncStdout: r.stderr,
		Logger:     hclog.NewNullLogger(),
	})
	fail := func(cause error, format string, args ...any) error {
		p.kill(false)
		return &Error{Err: cause, Msg: fmt.Sprintf(format, args...), Stderr: r.stderr.Tail()}
	}
	cp, err := p.client.Client()
	if err != nil {
		if cerr := context.Cause(life); cerr != nil {
			return nil, fail(cerr, "start %s: %v", r.argv[0], cerr)
		}
		return nil, fail(ErrExit, "start %s: %v", r.argv[0], err)
	}
	raw, err := cp.Dispense(wire.PluginName)
	if err != nil {
		return nil, fail(ErrProtocol, "start %s: %v", r.argv[0], err)
	}
	p.rpc = raw.(*wire.Client)
	infoCtx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	info, err := p.rpc.Info(infoCtx)
	if err != nil {
		return nil, fail(ErrProtocol, "ask %s for its info: %v", r.argv[0], err)
	}
	if err := checkSDK(info.SDKVersion); err != nil {
		return nil, fail(err, "%s: %v", r.argv[0], err)
	}
	r.p = p
	return p, nil
}

// checkSDK checks a plugin's SDK version against wire.SupportedSDKVersions.
func checkSDK(v string) error {
	sv, err := semver.NewVersion(v)
	if err != nil {
		return fmt.Errorf("%w: the plugin reports SDK version %q, which is not a semantic version", ErrSDKVersion, v)
	}
	supported, _ := semver.NewConstraint(wire.SupportedSDKVersions) // a constant that parses
	if !supported.Check(sv) {
		return fmt.Errorf("%w: the plugin was built with SDK %s; this host supports %s", ErrSDKVersion, sv, wire.SupportedSDKVersions)
	}
	return nil
}

// drop kills p at once and forgets it, if it is still the current process.
func (r *Runtime) drop(p *process) {
	r.mu.Lock()
	if r.p == p {
		r.p = nil
	}
	r.mu.Unlock()
	p.kill(false)
}

// kill stops the process: gracefully first when asked (go-plugin's shutdown, a
// couple of seconds at most), then by killing the whole process group; it removes
// the private copy of the executable. It is idempotent.
func (p *process) kill(graceful bool) {
	p.once.Do(func() {
		if !graceful {
			p.end()
		}
		p.client.Kill()
		if p.cmd.Process != nil {
			_ = proc.KillGroup(p.cmd.Process.Pid)
		}
		// Descendants that left the group (setsid, a double fork) end too.
		p.contained.Sweep()
		p.end()
		_ = os.RemoveAll(p.tmp)
	})
}

// Close stops the plugin process, if one runs. The runtime can still be used: a
// later Run starts a new process.
func (r *Runtime) Close() error {
	r.mu.Lock()
	p := r.p
	r.p = nil
	r.mu.Unlock()
	if p != nil {
		p.kill(true)
	}
	return nil
}
