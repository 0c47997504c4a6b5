package action

import (
	"context"
	"path"
	"sync"

	"github.com/kubeplug/kubeplug/internal/proc"
	"github.com/kubeplug/kubeplug/pkg/check"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// validateHook returns the engine's validate hook: it runs the validate checks of
// a wave's plugins against the cluster, every plugin at once, and appends their
// results to res in wave order. A failed check is a fatal diagnostic. A dry run
// deploys nothing, so it checks nothing.
func (a *Apply) validateHook(p *prepared, res *ApplyResult) func(context.Context, int, []*engine.Planned, *model.Model) diag.List {
	var runner *check.Runner
	return func(ctx context.Context, _ int, plugins []*engine.Planned, _ *model.Model) diag.List {
		if a.DryRun {
			return nil
		}
		var l diag.List
		if runner == nil {
			// The cluster's config is known only now under kubeplug up, which brings
			// the cluster up in the deploy stage.
			rc, err := a.Cluster.Config()
			if err == nil {
				runner, err = check.New(rc, check.Options{Logger: a.cfg.logger(), Cluster: p.cluster.Spec.Metadata.Name})
			}
			if err != nil {
				l.Errorf("", 0, 0, "", "validate checks: %v", err)
				return l
			}
		}
		results := make([][]check.Result, len(plugins))
		var wg sync.WaitGroup
		for i, pl := range plugins {
			spec := pl.Package.Manifest.Spec
			if len(spec.Validate) == 0 {
				continue
			}
			cp := check.Plugin{Name: pl.Package.Name, Checks: spec.Validate, FS: pl.Package.FS, Dir: proc.PackageDir(pl.Package.Location)}
			cp.Pins = map[string]string{}
			if rt := spec.Runtime; rt != nil {
				cp.Pins[path.Clean(rt.Command[0])] = rt.SHA256
			}
			for _, c := range spec.Validate {
				if c.Exec != nil && c.Exec.SHA256 != "" {
					cp.Pins[path.Clean(c.Exec.Command[0])] = c.Exec.SHA256
				}
			}
			wg.Go(func() { results[i] = runner.Run(ctx, cp) })
		}
		wg.Wait()
		for _, r := range results {
			res.Checks = append(res.Checks, r...)
			l = append(l, check.Diagnostics(r)...)
		}
		return l
	}
}
