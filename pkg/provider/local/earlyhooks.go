package local

import (
	"context"
	"fmt"
	"sync"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// earlyPhase is a simulated worker's files and beforeNodeup phase, run while
// a new cluster's control plane starts (startEarlyHooks); its node's upNode
// takes the outcome once done is closed.
type earlyPhase struct {
	done chan struct{}
	sum  provider.HookSummary
	err  error
}

// startEarlyHooks starts, on a new cluster, each simulated worker's machine
// files and beforeNodeup hooks while the control plane starts, at most
// Options.Parallel at a time. They need no cluster (the node joins after
// them), so they need not wait the seconds of the API server's start, as a new
// cluster's worker machines boot while its control-plane machine does
// (upControlPlaneMachine). The nodes are recorded first, as staleNodes
// records them before their directories are made. The run's cleanup waits for
// them; an Up that fails before node-join cancels them.
func (u *upRun) startEarlyHooks(ctx context.Context) error {
	p := u.p
	var workers []*desiredNode
	for _, n := range u.nodes {
		if n != u.cpNode && !p.realPool(n.pool) {
			workers = append(workers, n)
		}
	}
	if len(u.prev) > 0 || len(workers) == 0 {
		return nil
	}
	u.st.Nodes = u.desiredState()
	if err := writeState(p.opts.StateDir, u.st); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	sem := make(chan struct{}, p.opts.Parallel)
	u.early = map[string]*earlyPhase{}
	for _, n := range workers {
		e := &earlyPhase{done: make(chan struct{})}
		u.early[n.name] = e
		wg.Go(func() {
			defer close(e.done)
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				e.err = fmt.Errorf("node %s: %s: %w", n.name, hookspec.PhaseBeforeNodeup, ctx.Err())
				return
			}
			e.sum, e.err = p.beforeNodeup(ctx, n)
		})
	}
	u.cleanup = append(u.cleanup, func() {
		cancel()
		wg.Wait()
	})
	return nil
}

// beforeNodeup writes a worker's machine files and runs its beforeNodeup
// phase.
func (p *Provider) beforeNodeup(ctx context.Context, n *desiredNode) (provider.HookSummary, error) {
	if err := p.writeMachine(n.name, n.machine); err != nil {
		return provider.HookSummary{}, err
	}
	return p.runPhase(ctx, n, hookspec.PhaseBeforeNodeup)
}

// outcome waits for e's phase, or ctx.
func (e *earlyPhase) outcome(ctx context.Context, node string) (provider.HookSummary, error) {
	select {
	case <-e.done:
		return e.sum, e.err
	case <-ctx.Done():
		return provider.HookSummary{}, fmt.Errorf("node %s: %s: %w", node, hookspec.PhaseBeforeNodeup, ctx.Err())
	}
}
