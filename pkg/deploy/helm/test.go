package helm

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
)

// TestResult is what one test hook of a release did under `helm test`.
type TestResult struct {
	// Hook is the hook's name (its object's name), Kind its object's kind.
	Hook, Kind string
	// Phase is Helm's: Succeeded, Failed, Running or Unknown.
	Phase string
}

// Test runs a release's test hooks (helm.sh/hook: test) as `helm test` does:
// in weight order, each waited for until it succeeds or fails (a Pod or Job; any
// other object when created), deleted afterwards as its hook-delete-policy says;
// the phases are kept in the release record. It returns each test hook's result
// and an error when one failed, naming the release and the hook. A release
// without test hooks passes with no results. Cancelling ctx abandons the wait
// (Helm's own call has no context; it ends at the Manager's Timeout).
func (m *Manager) Test(ctx context.Context, ref kube.ReleaseRef) ([]TestResult, error) {
	cfg, err := m.Config(ref.Namespace)
	if err != nil {
		return nil, err
	}
	t := action.NewReleaseTesting(cfg)
	t.Namespace = ref.Namespace
	t.Timeout = m.opts.Timeout
	type out struct {
		rel *releasev1.Release
		err error
	}
	done := make(chan out, 1)
	go func() {
		reli, shutdown, err := t.Run(ref.Name)
		if shutdown != nil {
			// The hooks' delete policies (hook-succeeded, hook-failed) apply now.
			if serr := shutdown(); err == nil && serr != nil {
				err = serr
			}
		}
		var rel *releasev1.Release
		if reli != nil {
			rel, _ = asV1(reli)
		}
		done <- out{rel, err}
	}()
	var o out
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("helm test of release %s: %w", ref, context.Cause(ctx))
	case o = <-done:
	}
	var res []TestResult
	var failed []string
	if o.rel != nil {
		for _, h := range o.rel.Hooks {
			if !slices.Contains(h.Events, releasev1.HookTest) {
				continue
			}
			r := TestResult{Hook: h.Name, Kind: h.Kind, Phase: string(h.LastRun.Phase)}
			res = append(res, r)
			if h.LastRun.Phase != releasev1.HookPhaseSucceeded {
				failed = append(failed, h.Kind+" "+h.Name+" ("+r.Phase+")")
			}
		}
	}
	if o.err != nil {
		msg := o.err.Error()
		if len(failed) > 0 {
			msg = "test hooks " + strings.Join(failed, ", ") + " did not succeed: " + msg
		}
		return res, fmt.Errorf("helm test of release %s: %s", ref, truncate(msg, 2000))
	}
	return res, nil
}
