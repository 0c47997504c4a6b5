package controlplane

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// reconfigureGrace bounds the wait for a component to exit when it restarts for
// new flags. kube-apiserver keeps running until its clients' watches end, which
// they never do by themselves; it holds no state of its own, so a short grace
// loses nothing but in-flight requests, which clients retry.
const reconfigureGrace = time.Second

// Flags are the settings of a running control plane that Reconfigure changes;
// they mean what the Options fields of the same names mean.
type Flags struct {
	// Args, as Options.Args, replace the command lines of the components they
	// name entirely.
	Args                   map[Component][]string
	APIServerFlags         map[string]string
	ControllerManagerFlags map[string]string
	SchedulerFlags         map[string]string
	FeatureGates           map[string]bool
}

// Reconfigure gives etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler the flags f (replacing the ones Start or an earlier Reconfigure
// gave) and restarts, in that order, only the components whose command line
// changed; each keeps its port and certificates. etcd gets
// Options.StopGracePeriod to exit (it syncs its data), the others at most a
// second (see reconfigureGrace). It returns the restarted components. A
// component that fails to come back is an error naming it and its log; the
// components after it keep their old flags.
func (c *ControlPlane) Reconfigure(ctx context.Context, f Flags) ([]Component, error) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil, fmt.Errorf("reconfigure: %w", ErrStopped)
	}
	next := c.opts
	next.APIServerFlags = maps.Clone(f.APIServerFlags)
	next.ControllerManagerFlags = maps.Clone(f.ControllerManagerFlags)
	next.SchedulerFlags = maps.Clone(f.SchedulerFlags)
	next.FeatureGates = maps.Clone(f.FeatureGates)
	next.Args = cloneArgs(f.Args)
	args := c.computeArgs(next)
	c.mu.Unlock()

	var restarted []Component
	for _, comp := range []Component{Etcd, APIServer, ControllerManager, Scheduler} {
		c.mu.Lock()
		same := slices.Equal(args[comp], c.args[comp])
		if !same {
			c.args[comp] = args[comp]
		}
		c.mu.Unlock()
		if same {
			continue
		}
		c.log.Info("component flags changed", "component", comp)
		grace := c.opts.StopGracePeriod
		if comp != Etcd {
			grace = min(grace, reconfigureGrace)
		}
		if err := c.restart(ctx, comp, grace); err != nil {
			return restarted, err
		}
		restarted = append(restarted, comp)
	}
	c.mu.Lock()
	c.opts.APIServerFlags, c.opts.ControllerManagerFlags = next.APIServerFlags, next.ControllerManagerFlags
	c.opts.SchedulerFlags, c.opts.FeatureGates = next.SchedulerFlags, next.FeatureGates
	c.opts.Args = next.Args
	c.mu.Unlock()
	return restarted, nil
}

// Args returns a copy of a component's current command line (without the
// binary), for diagnostics.
func (c *ControlPlane) Args(comp Component) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.args[comp])
}
