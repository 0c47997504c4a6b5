package controlplane

import (
	"context"
	"fmt"
	"maps"
	"net"
	"strconv"
	"time"
)

// UpgradeOrder is the order in which Upgrade moves the components to new
// binaries, the order Kubernetes' version skew policy asks for: etcd, then
// kube-apiserver (which must not be older than the controllers that talk to
// it), then kube-controller-manager and kube-scheduler, then kwok (the
// simulated nodes' kubelets).
var UpgradeOrder = []Component{Etcd, APIServer, ControllerManager, Scheduler, Kwok}

// Upgrade runs the control plane from the binaries in binDir (another
// Kubernetes version) with the flags f, one component at a time in
// UpgradeOrder: each is stopped, started from binDir with its new command line,
// its ports and certificates, and waited for healthy before the next one
// stops. progress, when not nil, is called before each component. binDir is
// recorded in the state file before the first component stops, so a control
// plane interrupted mid-upgrade (Ctrl-C, kill -9) restarts from the new
// binaries, and calling Upgrade again (after Attach) finishes the upgrade: a
// component already on binDir is merely restarted. A component that fails to
// come back is an error naming it; the ones after it keep running.
func (c *ControlPlane) Upgrade(ctx context.Context, binDir string, f Flags, progress func(Component)) error {
	dir, err := FindBinDir(binDir)
	if err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return fmt.Errorf("upgrade: %w", ErrStopped)
	}
	next := c.opts
	next.APIServerFlags = maps.Clone(f.APIServerFlags)
	next.ControllerManagerFlags = maps.Clone(f.ControllerManagerFlags)
	next.SchedulerFlags = maps.Clone(f.SchedulerFlags)
	next.FeatureGates = maps.Clone(f.FeatureGates)
	next.Args = cloneArgs(f.Args)
	args := c.computeArgs(next)
	c.binDir = dir
	err = c.saveStateLocked()
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	for _, comp := range UpgradeOrder {
		if progress != nil {
			progress(comp)
		}
		c.mu.Lock()
		c.args[comp] = args[comp]
		c.mu.Unlock()
		grace := c.opts.StopGracePeriod
		if comp != Etcd {
			grace = min(grace, reconfigureGrace)
		}
		if err := c.restart(ctx, comp, grace); err != nil {
			return fmt.Errorf("upgrade: %w", err)
		}
	}
	c.mu.Lock()
	c.opts.APIServerFlags, c.opts.ControllerManagerFlags = next.APIServerFlags, next.ControllerManagerFlags
	c.opts.SchedulerFlags, c.opts.FeatureGates = next.SchedulerFlags, next.FeatureGates
	c.opts.Args = next.Args
	c.mu.Unlock()
	return nil
}

// portFreeWait bounds waitPortFree.
const portFreeWait = 10 * time.Second

// waitPortFree waits until port can be listened on at the loopback address
// (or portFreeWait passes, or ctx is done: starting the component then reports
// the port in use).
func (c *ControlPlane) waitPortFree(ctx context.Context, port int) {
	if port <= 0 {
		return
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(portFreeWait)
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			_ = l.Close()
			return
		}
		if time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
