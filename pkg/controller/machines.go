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
	phase := phaseOf(e, t.down)
	if m.Phase == ctrlv1.MachineReady && !t.down && strings.HasPrefix(e.Message, "connecting to") {
		// up connects to Ready hosts again after they are Ready (their
		// afterDeploy hooks): a connection alone does not change them.
		return
	}
	if phase == phaseGone {
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

// phaseGone is phaseOf's word for a machine that leaves the list: cleaned by
// down, or removed from the file and cleaned or forgotten.
const phaseGone = "-"

// finishedPhases are the phases of a finished item (an event with Done), by
// the start of its message: the hosts provider's words, the same the CLI
// shows.
var finishedPhases = []struct{ prefix, phase string }{
	{"failed: ", ctrlv1.MachineFailed},
	{"clean", phaseGone},
	{"removed, clean", phaseGone},
	{"forgotten", phaseGone},
	{"Ready", ctrlv1.MachineReady},
	{"rolled, Ready", ctrlv1.MachineReady},
	// Waits for a run in which no other host fails.
	{"not rolled", ctrlv1.MachinePending},
}

// stepPhases are the phases of a step in progress, by the start of its
// message, other than Provisioning.
var stepPhases = []struct{ prefix, phase string }{
	{"removed from cluster.yaml", ctrlv1.MachineDeleting},
	{"unreachable: forgotten", ctrlv1.MachineDeleting},
	{"removing kubeplug's files", ctrlv1.MachineDeleting},
	{"joining", ctrlv1.MachineJoining},
	{"starting the kubelet", ctrlv1.MachineJoining},
	{"restarting the pool's units", ctrlv1.MachineJoining},
	{"control plane ready", ctrlv1.MachineJoining},
}

// phaseOf is the phase a provider event puts its machine in: phaseGone when
// it leaves the list, "" for a finished item of no known meaning (the phase
// stays). During down every step is Deleting; during up a step not known
// here is Provisioning.
func phaseOf(e provider.Event, down bool) string {
	rules, otherwise := stepPhases, ctrlv1.MachineProvisioning
	switch {
	case e.Done:
		rules, otherwise = finishedPhases, ""
	case down:
		return ctrlv1.MachineDeleting
	}
	for _, r := range rules {
		if strings.HasPrefix(e.Message, r.prefix) {
			return r.phase
		}
	}
	return otherwise
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
