package runtime

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime/exec"
	"github.com/kubeplug/kubeplug/pkg/runtime/grpc"
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
}

// New returns the runtime of pkg's spec.runtime. The caller closes it when it is
// an io.Closer (grpc runtimes are).
func New(pkg *plugin.Package, opts Options) (engine.Runtime, error) {
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

// Set makes runtimes and closes them all at the end of a run. It is safe for
// concurrent use.
type Set struct {
	opts    Options
	mu      sync.Mutex
	closers []io.Closer
}

// NewSet returns an empty set.
func NewSet(opts Options) *Set { return &Set{opts: opts} }

// Runtime returns the runtime of pkg's spec.runtime, remembering it for Close. Its
// signature is engine.Options.CodeRuntime's.
func (s *Set) Runtime(pkg *plugin.Package) (engine.Runtime, error) {
	rt, err := New(pkg, s.opts)
	if err != nil {
		return nil, err
	}
	if c, ok := rt.(io.Closer); ok {
		s.mu.Lock()
		s.closers = append(s.closers, c)
		s.mu.Unlock()
	}
	return rt, nil
}

// Close stops every plugin process the set's runtimes started.
func (s *Set) Close() error {
	s.mu.Lock()
	closers := s.closers
	s.closers = nil
	s.mu.Unlock()
	var errs []error
	for _, c := range closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
