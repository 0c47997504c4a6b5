package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// machineTracker keeps a ManagedCluster's machines (status.machines) in step
// with the provider's progress events during one up or down: the events the
// CLI's live display shows, read as phases. The provider sends events from
// its own goroutines; the reconcile reads a copy (list) to patch the status
// on the way.
type machineTracker struct {
	mu       sync.Mutex
	machines []ctrlv1.MachineStatus
	// down says the run is a down: every step is Deleting.
	down bool
	// changed says an event changed the machines since the last list.
	changed bool
}

// newMachineTracker lists cl's machines: those of the file (for hosts, every
// host, with its pool, role and address), keeping the phase each had in was,
// then those of was the file no longer lists (a removed host is cleaned by
// this run, and stays until it is).
func newMachineTracker(cl *config.Cluster, was []ctrlv1.MachineStatus, down bool) *machineTracker {
	t := &machineTracker{down: down}
	prev := map[string]ctrlv1.MachineStatus{}
	for _, m := range was {
		prev[m.Name] = m
	}
	for _, m := range machinesOf(cl) {
		if p, ok := prev[m.Name]; ok {
			m.Phase, m.Step, m.Message = p.Phase, p.Step, p.Message
			delete(prev, m.Name)
		}
		t.machines = append(t.machines, m)
	}
	for _, m := range was {
		if _, ok := prev[m.Name]; ok {
			t.machines = append(t.machines, m)
		}
	}
	return t
}

// machinesOf are the machines a cluster file lists, Pending: the hosts
// provider's hosts, named <pool>-<index> as the provider names their Nodes.
// Other providers' machines are known from their events only.
func machinesOf(cl *config.Cluster) []ctrlv1.MachineStatus {
	hp := cl.Spec.Spec.Provider.Hosts
	if hp == nil {
		return nil
	}
	roles := map[string]string{model.ControlPlanePool: "control-plane"}
	for _, p := range cl.Spec.Spec.NodePools {
		roles[p.Name] = cmp.Or(p.Role, "worker")
	}
	var out []ctrlv1.MachineStatus
	for _, p := range hp.Pools {
		for j, h := range p.Hosts {
			out = append(out, ctrlv1.MachineStatus{
				Name: fmt.Sprintf("%s-%d", p.Name, j), Pool: p.Name, Role: roles[p.Name],
				Address: strings.Trim(h.Address, "[]"), Phase: ctrlv1.MachinePending,
			})
		}
	}
	return out
}

// The limits of a machine's step and message (the CRD's maxLength).
const (
	maxStep    = 512
	maxMessage = 4096
)

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-len("…")] + "…"
}

// event reads one provider event into its machine's phase (see phaseOf). An
// event about no node, or a byte count, changes nothing.
func (t *machineTracker) event(e provider.Event) {
	if e.Node == "" || (e.Total > 0 && !e.Done) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(t.machines, func(m ctrlv1.MachineStatus) bool { return m.Name == e.Node })
	if i < 0 {
		t.machines = append(t.machines, ctrlv1.MachineStatus{Name: e.Node, Phase: ctrlv1.MachinePending})
		i = len(t.machines) - 1
	}
	m := &t.machines[i]
	phase, gone := phaseOf(e, t.down)
	if gone {
		t.machines = slices.Delete(t.machines, i, i+1)
		t.changed = true
		return
	}
	switch phase {
	case "":
		m.Step = clip(e.Message, maxStep)
	case ctrlv1.MachineFailed:
		// Step stays the step it failed at.
		m.Phase, m.Message = phase, clip(strings.TrimPrefix(e.Message, "failed: "), maxMessage)
	default:
		m.Phase, m.Step, m.Message = phase, clip(e.Message, maxStep), ""
	}
	t.changed = true
}

// phaseOf is the phase a provider event puts its machine in ("": a finished
// item of no known meaning, which leaves the phase as it is), and whether the
// machine is gone (cleaned by down, or removed from the file and cleaned or
// forgotten). The hosts provider's events are read by their words (the same
// words the CLI shows); a step not known here is Provisioning while up runs.
func phaseOf(e provider.Event, down bool) (phase string, gone bool) {
	msg := e.Message
	switch {
	case e.Done && strings.HasPrefix(msg, "failed: "):
		return ctrlv1.MachineFailed, false
	case e.Done && (msg == "clean" || msg == "removed, clean" || msg == "forgotten"):
		return "", true
	case e.Done && (msg == "Ready" || msg == "rolled, Ready"):
		return ctrlv1.MachineReady, false
	case e.Done && strings.HasPrefix(msg, "not rolled"):
		// Waits for a run in which no other host fails.
		return ctrlv1.MachinePending, false
	case down || strings.HasPrefix(msg, "removed from cluster.yaml") || strings.HasPrefix(msg, "unreachable: forgotten") || strings.HasPrefix(msg, "removing kubeplug's files"):
		return ctrlv1.MachineDeleting, false
	case msg == "joining" || strings.HasPrefix(msg, "starting the kubelet") || strings.HasPrefix(msg, "restarting the pool's units") || strings.HasPrefix(msg, "control plane ready"):
		return ctrlv1.MachineJoining, false
	case e.Done:
		return "", false
	}
	return ctrlv1.MachineProvisioning, false
}

// stopped marks the machines a failed run left in progress (Provisioning,
// Joining, Deleting) Failed, at their last step, with the run's error: the
// provider stopped before it said more of them (the control plane did not
// answer, the run was cancelled).
func (t *machineTracker) stopped(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	first, _, _ := strings.Cut(err.Error(), "\n")
	for i := range t.machines {
		m := &t.machines[i]
		switch m.Phase {
		case ctrlv1.MachineProvisioning, ctrlv1.MachineJoining, ctrlv1.MachineDeleting:
			m.Phase, m.Message = ctrlv1.MachineFailed, clip("the run stopped: "+first, maxMessage)
			t.changed = true
		}
	}
}

// finished drops, after an up that succeeded, the machines the file no
// longer lists (cleaned, or forgotten).
func (t *machineTracker) finished(cl *config.Cluster) {
	if cl.Spec.Spec.Provider.Hosts == nil {
		return
	}
	listed := map[string]bool{}
	for _, m := range machinesOf(cl) {
		listed[m.Name] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.machines = slices.DeleteFunc(t.machines, func(m ctrlv1.MachineStatus) bool { return !listed[m.Name] })
}

// list returns a copy of the machines, and whether they changed since the
// last list.
func (t *machineTracker) list() ([]ctrlv1.MachineStatus, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := t.changed
	t.changed = false
	return slices.Clone(t.machines), ch
}
