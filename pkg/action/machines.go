package action

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// A plugin contributes to the machines as well as to the Kubernetes API:
// control-plane flags, node labels and taints, files and units. Only a
// provider brings machines to what the plugins contribute, and only for a
// cluster it runs. So uninstall and rollback, which otherwise change only
// Kubernetes objects, reconcile the machines of the cluster file's own cluster
// (the local provider's, its state known: KubeconfigTarget.forCluster) with
// up's steps before connect — provider, resolve, initialise, render,
// provision — on the file edited in memory to what the cluster is once the
// operation is done (config.Cluster.Without, Pinned). On any other cluster they
// say which contributions stay, and how to remove them (leftBehind).

// MachinesResult says how an uninstall reconciled the machines of a cluster
// kubeplug brought up.
type MachinesResult struct {
	// Cluster is the cluster whose machines were reconciled.
	Cluster string `json:"cluster"`
	// Restarted are the control-plane components restarted because their flags
	// changed.
	Restarted []string `json:"restarted,omitempty"`
}

// machines reconciles the machines of the cluster file's own cluster to an
// edited cluster file: prepare runs provider, resolve, initialise and render
// (changing nothing), provision has the provider bring the machines there.
// Close it when done: it ends the plugin processes the run started.
type machines struct {
	up  *Up
	r   *run
	res *UpResult
}

// prepareMachines runs up's steps up to render on edited, the cluster file as
// the cluster is once the operation is done. It changes nothing. want is each
// plugin's record once the operation is done: when the plan differs from it
// (another version or values, a plugin the cluster does not have or the file
// does not enable), a reconcile would change more than the operation means, so
// machines is nil and the reasons say why; so too when a step fails.
func (c *Config) prepareMachines(ctx context.Context, edited *config.Cluster, stateDir string, events func(provider.Event), want map[string]*deploy.Record) (*machines, []string) {
	u := &Up{cfg: c, StateDir: stateDir, ProviderEvents: events}
	m := &machines{up: u, r: c.newRun(edited, false), res: &UpResult{Versions: map[string]string{}, Contributed: map[string]map[string]int{}}}
	l := m.r.pipeline(ctx, u.providerStep(m.res), factsStep, resolveStep, stageStep(stage.Initialise), stageStep(stage.Render))
	if l.HasFatal() {
		m.close()
		var why []string
		for _, d := range l {
			if d.Severity == diag.Fatal {
				why = append(why, d.String())
			}
		}
		return nil, why
	}
	if why := m.differences(edited.File, want); len(why) > 0 {
		m.close()
		return nil, why
	}
	return m, nil
}

// differences says how the plan differs from want (see prepareMachines).
func (m *machines) differences(file string, want map[string]*deploy.Record) []string {
	var why []string
	planned := map[string]bool{}
	for _, pl := range m.r.plan.Plugins {
		name := pl.Package.Name
		planned[name] = true
		rec := want[name]
		if rec == nil {
			why = append(why, fmt.Sprintf("%s enables %s, which the cluster does not have", file, name))
			continue
		}
		if v := pl.Package.Version.String(); v != rec.Version {
			why = append(why, fmt.Sprintf("%s resolves %s to version %s, the cluster has %s", file, name, v, rec.Version))
			continue
		}
		if d, err := valuesDigest(pl); err != nil || rec.ValuesDigest != "" && d != rec.ValuesDigest {
			why = append(why, fmt.Sprintf("the values %s gives %s are not those of its revision %d (kubeplug records only a digest of values)", file, name, rec.Revision))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if !planned[name] {
			why = append(why, fmt.Sprintf("the cluster has %s, which %s does not enable", name, file))
		}
	}
	return why
}

// provision has the provider bring the machines to the prepared state.
func (m *machines) provision(ctx context.Context) (*MachinesResult, diag.List) {
	l := m.r.pipeline(ctx, m.up.provisionStep(m.res))
	return &MachinesResult{Cluster: m.res.Cluster, Restarted: m.res.Restarted}, l
}

func (m *machines) close() { m.r.close() }

// records are the plugins' current records, by name.
func records(invs []*deploy.Record) map[string]*deploy.Record {
	out := make(map[string]*deploy.Record, len(invs))
	for _, inv := range invs {
		out[inv.Plugin] = inv
	}
	return out
}

// dependents is plugins and, with cascade, every installed plugin that
// requires one of them, transitively: what deploy.Deployer.Uninstall removes
// (without cascade it refuses instead).
func dependents(invs []*deploy.Record, plugins []string, cascade bool) []string {
	remove := map[string]bool{}
	for _, p := range plugins {
		remove[p] = true
	}
	for changed := cascade; changed; {
		changed = false
		for _, inv := range invs {
			if remove[inv.Plugin] {
				continue
			}
			for _, r := range inv.Requires {
				if remove[r] {
					remove[inv.Plugin] = true
					changed = true
					break
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(remove))
}

// leftBehind says what uninstalling (or rolling back) a plugin leaves of its
// contributions outside Kubernetes objects, and how to remove them; why, when
// set, says why kubeplug did not reconcile the machines of a cluster it
// brought up.
func leftBehind(l *diag.List, plugin, what string, machine []string, why []string) {
	if len(machine) == 0 {
		return
	}
	hint := "remove the plugin from the cluster file and run `kubeplug up -f cluster.yaml`"
	if what == "rollback" {
		hint = "set the plugin's version and values in the cluster file to the revision's and run `kubeplug up -f cluster.yaml`"
	}
	if len(why) > 0 {
		l.Warnf("", 0, 0, "", "plugin %s: %s changes only Kubernetes objects here, since %s; its other contributions stay until the cluster's machines are reconciled: %s. To reconcile them, %s",
			plugin, what, strings.Join(why, "; "), strings.Join(machine, ", "), hint)
		return
	}
	l.Warnf("", 0, 0, "", "plugin %s: %s changes only Kubernetes objects; its other contributions stay until the cluster's machines are reconciled: %s. On a cluster kubeplug brought up, give -f with its cluster file (`kubeplug %s -f cluster.yaml`) to reconcile them too, or %s; elsewhere, use your provider's update",
		plugin, what, strings.Join(machine, ", "), what, hint)
}

// notReconciled is the error of a reconcile that failed after the objects
// changed: the provider's own diagnostics say why, this says which
// contributions may stay (the provider may have changed some before it
// failed) and how to go on.
func notReconciled(l *diag.List, cluster, next string, stays map[string][]string) {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(stays)) {
		if len(stays[p]) > 0 {
			parts = append(parts, "plugin "+p+": "+strings.Join(stays[p], ", "))
		}
	}
	if len(parts) == 0 {
		return
	}
	l.Errorf("", 0, 0, "", "the objects changed, but reconciling the machines of cluster %s failed (above), so these contributions may stay: %s. Fix the cause, then %s",
		cluster, strings.Join(parts, "; "), next)
}
