package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

// Default timeouts, used when a check sets none.
const (
	DefaultWaitTimeout       = 5 * time.Minute
	DefaultExpressionTimeout = 2 * time.Minute
	DefaultExecTimeout       = 2 * time.Minute
)

// Plugin is what Run needs of one plugin.
type Plugin struct {
	// Name is the plugin's name, for results and KUBEPLUG_PLUGIN.
	Name string
	// Checks are plugin.yaml's spec.validate, already checked by pkg/plugin.
	Checks []v1alpha1.Check
	// FS is the plugin package's files; exec checks run executables from it.
	FS fs.FS
	// Dir is the package's directory on disk, the working directory of exec
	// checks; empty runs them in a private temporary directory.
	Dir string
	// Pins maps executable paths inside the package to the hex sha256 plugin.yaml
	// pins them to (spec.runtime.sha256 for its command): an exec check of a pinned
	// executable runs only when the digest matches.
	Pins map[string]string
	// Values are the plugin's values for this cluster (sensitive ones in
	// clear, as the plugin's own code gets them): exec checks read them as
	// JSON from the file $KUBEPLUG_VALUES names. Nil writes {}.
	Values map[string]any
}

// Options configure a Runner.
type Options struct {
	// Logger receives progress and exec checks' output lines; discarded when nil.
	Logger *slog.Logger
	// Cluster is the cluster's name, given to exec checks as KUBEPLUG_CLUSTER.
	Cluster string
	// Interval is the longest a failed check waits before its next attempt
	// (default 1s): the first retry comes Interval/10 after the first
	// attempt, each wait twice the one before, up to Interval, so that what
	// turns true a moment after it is first looked at (an EndpointSlice a
	// controller updates once the Pod behind it is Ready) is not seen a whole
	// Interval late.
	Interval time.Duration
}

// Result is how one check went.
type Result struct {
	// Plugin is the plugin the check belongs to.
	Plugin string `json:"plugin"`
	// Name is the check's name, or a default naming what it checks
	// ("wait Deployment/kube-system/metrics-server").
	Name string `json:"name"`
	// OK is true when the check passed.
	OK bool `json:"ok"`
	// Message says what passed, or what failed and the last reason why.
	Message string `json:"message,omitempty"`
	// Duration is how long the check took, retries included.
	Duration time.Duration `json:"duration"`
}

// Runner runs checks against one cluster. It is safe for concurrent use.
type Runner struct {
	cfg  *rest.Config
	dyn  dynamic.Interface
	disc discovery.DiscoveryInterface
	opts Options
	log  *slog.Logger
}

// New returns a Runner for the cluster cfg points at.
func New(cfg *rest.Config, opts Options) (*Runner, error) {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		// Every check polls at once; client-go's default of 5 would throttle them.
		cfg.QPS, cfg.Burst = 50, 100
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a client for validate checks: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a discovery client for validate checks: %w", err)
	}
	return &Runner{cfg: cfg, dyn: dyn, disc: disc, opts: opts, log: log}, nil
}

// Run runs every check of p at once and returns their results in the order of
// p.Checks. It returns when every check has passed or given up; cancelling ctx
// makes the checks still running fail at once.
func (r *Runner) Run(ctx context.Context, p Plugin) []Result {
	out := make([]Result, len(p.Checks))
	var wg sync.WaitGroup
	for i, c := range p.Checks {
		wg.Go(func() { out[i] = r.run(ctx, p, c) })
	}
	wg.Wait()
	return out
}

// attempt is one try of a check: what passed, or why it did not. A terminal
// error stops the retries (an executable that cannot be read will not become
// readable).
type attempt func(ctx context.Context) (ok string, err error)

// failing is why an attempt did not pass, worded to follow the check's subject:
// "is false" and the object, "exited with status 1" and its output.
type failing struct {
	state, detail string
	// transient marks a failure to talk to the API server, which says less about
	// the check than the reason observed before it.
	transient bool
}

func (f *failing) Error() string {
	if f.detail == "" {
		return f.state
	}
	return f.state + ": " + f.detail
}

// transient says err is a failure to talk to the API server.
func transient(err error) bool {
	var f *failing
	return errors.As(err, &f) && f.transient
}

// terminal marks an error that retrying cannot fix.
type terminal struct{ error }

func (t terminal) Unwrap() error { return t.error }

// run runs check c of plugin p until it passes, fails for good or times out.
func (r *Runner) run(ctx context.Context, p Plugin, c v1alpha1.Check) Result {
	start := time.Now()
	res := Result{Plugin: p.Name, Name: Name(c)}
	a, err := r.prepare(p, c)
	if a.cleanup != nil {
		defer a.cleanup()
	}
	if err != nil {
		res.Message = a.subject + ": " + err.Error()
		res.Duration = time.Since(start).Round(time.Millisecond)
		return res
	}
	res.OK, res.Message = r.poll(ctx, p, res.Name, a, start)
	res.Duration = time.Since(start).Round(time.Millisecond)
	r.log.Info("validate check finished", "plugin", p.Name, "check", res.Name, "ok", res.OK, "duration", res.Duration)
	return res
}

// prepared is a check ready to be tried: its attempt, what it checks (for
// messages), its timeout and what to clean up after it.
type prepared struct {
	try     attempt
	subject string
	timeout time.Duration
	cleanup func()
}

// prepare reads check c's kind and timeout and builds its attempt.
func (r *Runner) prepare(p Plugin, c v1alpha1.Check) (prepared, error) {
	var a prepared
	var err error
	switch {
	case c.Wait != nil:
		a.timeout, err = duration(c.Wait.Timeout, DefaultWaitTimeout)
		a.subject = ref(c.Wait.ObjectRef)
		a.try = r.wait(c.Wait)
	case c.Expression != nil:
		a.timeout, err = duration(c.Expression.Timeout, DefaultExpressionTimeout)
		a.subject = "expression " + c.Expression.Expression
		if c.Expression.Message != "" {
			a.subject = c.Expression.Message + " (expression " + c.Expression.Expression + ")"
		}
		if err == nil {
			a.try, err = r.expression(c.Expression)
		}
	case c.Exec != nil:
		a.timeout, err = duration(c.Exec.Timeout, DefaultExecTimeout)
		a.subject = "exec " + strings.Join(c.Exec.Command, " ")
		if err == nil {
			a.try, a.cleanup, err = r.exec(p, c.Exec)
		}
	default:
		err = errors.New("expected exactly one of wait, expression and exec")
	}
	return a, err
}

// poll tries a, then again after Interval/10, doubling up to every Interval, until it passes, fails for good (a terminal
// error) or its timeout ends, and says whether it passed and what to report.
func (r *Runner) poll(ctx context.Context, p Plugin, name string, a prepared, start time.Time) (bool, string) {
	tctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var last error
	for wait := r.opts.Interval / 10; ; wait = min(2*wait, r.opts.Interval) {
		msg, err := a.try(tctx)
		if err == nil {
			return true, msg
		}
		// An attempt cut short by the timeout, or by a failed request, says less
		// than the one before it.
		if last == nil || (tctx.Err() == nil && !transient(err)) {
			last = err
		}
		var term terminal
		if errors.As(err, &term) {
			return false, a.subject + ": " + err.Error()
		}
		r.log.Debug("validate check not passing yet", "plugin", p.Name, "check", name, "reason", err.Error())
		select {
		case <-tctx.Done():
			return false, timedOut(ctx, a, last, start)
		case <-time.After(wait):
		}
	}
}

// timedOut says how a check that did not pass ended: its last failure, and
// when (its timeout, an interrupt, or the whole run's deadline).
func timedOut(ctx context.Context, a prepared, last error, start time.Time) string {
	when := "after " + short(a.timeout)
	switch {
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		when = "when interrupted after " + short(time.Since(start))
	case ctx.Err() != nil:
		when = "after " + short(time.Since(start)) + " (the deadline of the whole run)"
	}
	state, detail := "is failing", last.Error()
	var f *failing
	if errors.As(last, &f) {
		state, detail = f.state, f.detail
	}
	msg := a.subject + " " + state + " " + when
	if detail != "" {
		msg += ": " + detail
	}
	return msg
}

// Name returns the check's name, or a default saying what it checks:
// "wait Deployment/kube-system/metrics-server", "expression IngressClass/nginx",
// "exec bin/check".
func Name(c v1alpha1.Check) string {
	if c.Name != "" {
		return c.Name
	}
	switch {
	case c.Wait != nil:
		return "wait " + refPath(c.Wait.ObjectRef)
	case c.Expression != nil:
		return "expression " + refPath(c.Expression.ObjectRef)
	case c.Exec != nil:
		return "exec " + strings.Join(c.Exec.Command, " ")
	}
	return ""
}

// refPath is Kind/namespace/name, Kind/name, or Kind alone.
func refPath(o v1alpha1.ObjectRef) string {
	s := o.Kind
	if o.Namespace != "" {
		s += "/" + o.Namespace
	}
	if o.Name != "" {
		s += "/" + o.Name
	}
	return s
}

// ref names an object for messages: "Deployment kube-system/metrics-server".
func ref(o v1alpha1.ObjectRef) string {
	switch {
	case o.Name == "" && o.Namespace != "":
		return o.Kind + " objects in namespace " + o.Namespace
	case o.Name == "":
		return o.Kind + " objects"
	case o.Namespace != "":
		return o.Kind + " " + o.Namespace + "/" + o.Name
	}
	return o.Kind + " " + o.Name
}

func duration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("timeout %q is not a positive Go duration", s)
	}
	return d, nil
}

// short prints a duration without trailing zero units: 2m, 1h30m, 1.5s.
func short(d time.Duration) string {
	if d >= time.Second {
		d = d.Round(100 * time.Millisecond)
	} else {
		d = d.Round(time.Millisecond)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Diagnostics returns a fatal diagnostic for every failed result, naming the
// plugin and the check.
func Diagnostics(results []Result) diag.List {
	var l diag.List
	for _, r := range results {
		if !r.OK {
			l = append(l, diag.Diagnostic{Severity: diag.Fatal, Plugin: r.Plugin, Message: fmt.Sprintf("validate check %q: %s", r.Name, r.Message)})
		}
	}
	return l
}
