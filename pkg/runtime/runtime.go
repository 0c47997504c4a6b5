package runtime

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime/declarative"
	"github.com/kubeplug/kubeplug/pkg/runtime/exec"
	"github.com/kubeplug/kubeplug/pkg/runtime/grpc"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Options configure the runtimes of every package. The zero value is ready to use.
type Options struct {
	// Logger receives plugins' stderr, one record per line with plugin=NAME;
	// discarded when nil.
	Logger *slog.Logger
	// Timeout, when positive, overrides every package's spec.runtime.timeout.
	Timeout time.Duration
	// Env is added to every plugin process's otherwise minimal environment.
	Env []string
	// InProcess are Go plugins by plugin name: a library user's values that run in
	// this process, after the named plugin's declarative parts and code. The plugin
	// still needs a package (its plugin.yaml gives name, version and dependencies).
	InProcess map[string]stage.Runtime
}

// New returns the runtime of pkg's spec.runtime: exec or grpc. The caller closes
// it when it is an io.Closer (both are: Close ends a grpc runtime's process and
// removes an exec runtime's private copy of its executable). Nothing is started
// yet.
func New(pkg *plugin.Package, opts Options) (stage.Runtime, error) {
	spec := pkg.Manifest.Spec.Runtime
	if spec == nil {
		return nil, fmt.Errorf("plugin %s has no spec.runtime", pkg.Name)
	}
	switch spec.Type {
	case v1alpha1.RuntimeExec:
		return exec.New(pkg, exec.Options{Logger: opts.Logger, Timeout: opts.Timeout, Env: opts.Env})
	case v1alpha1.RuntimeGRPC:
		return grpc.New(pkg, grpc.Options{Logger: opts.Logger, Timeout: opts.Timeout, Env: opts.Env})
	default:
		return nil, fmt.Errorf("plugin %s: spec.runtime.type: expected exec or grpc, found %q", pkg.Name, spec.Type)
	}
}

// Resolver is the standard runtime resolver (engine.RuntimeResolver): it gives
// every planned plugin its declarative runtime, then the runtime of its
// spec.runtime, then the in-process Go runtime registered under its name, and it
// remembers those runtimes so that one Close ends the processes they started and
// removes the private copies of their executables.
// Build one per run; it is safe for concurrent use.
type Resolver struct {
	opts    Options
	mu      sync.Mutex
	closers []io.Closer
}

// NewResolver returns a resolver with nothing started.
func NewResolver(opts Options) *Resolver { return &Resolver{opts: opts} }

// Runtimes returns the runtimes that run pkg's stages, in order. scope limits its
// node contributions to these pools (nil: every pool). The error says what is
// wrong with pkg's spec.runtime; nothing is started.
func (r *Resolver) Runtimes(pkg *plugin.Package, scope []string) ([]stage.Runtime, error) {
	rts := []stage.Runtime{declarative.New(pkg, scope)}
	if pkg.Manifest.Spec.Runtime != nil {
		rt, err := New(pkg, r.opts)
		if err != nil {
			return nil, err
		}
		if c, ok := rt.(io.Closer); ok {
			r.mu.Lock()
			r.closers = append(r.closers, c)
			r.mu.Unlock()
		}
		rts = append(rts, rt)
	}
	if rt, ok := r.opts.InProcess[pkg.Name]; ok {
		rts = append(rts, rt)
	}
	return rts, nil
}

// CheckPlan warns about in-process runtimes registered for plugins that the plan
// does not run: most likely a misspelt name, or a plugin the cluster left out.
func (r *Resolver) CheckPlan(plugins []string) diag.List {
	var l diag.List
	for _, name := range slices.Sorted(maps.Keys(r.opts.InProcess)) {
		if !slices.Contains(plugins, name) {
			l.Warnf("", 0, 0, "", "an in-process runtime is registered for plugin %s, which the cluster does not use", name)
		}
	}
	return l
}

// Close stops every plugin process the resolver's runtimes started and removes
// their executables' private copies. Call it when the run ends.
func (r *Resolver) Close() error {
	r.mu.Lock()
	closers := r.closers
	r.closers = nil
	r.mu.Unlock()
	var errs []error
	for _, c := range closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
