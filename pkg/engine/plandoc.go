package engine

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// PlanDoc is the reviewable summary of a plan and what each plugin contributed:
// plan.json in a render, and `kubeplug plan` output.
type PlanDoc struct {
	Cluster           string            `json:"cluster"`
	KubernetesVersion string            `json:"kubernetesVersion"`
	Plugins           []PlanPlugin      `json:"plugins"`
	Waves             [][]string        `json:"waves"`
	Contributions     []ContributionRef `json:"contributions"`
	// Lock is what the cluster file's lock file says of the plan, set by the
	// caller that read it; nil without one.
	Lock *PlanLock `json:"lock,omitempty"`
	// Expansions is what the expansions the run merges do besides the
	// plugins they contribute (set by the caller that merged them); nil
	// without expansions.
	Expansions *PlanExpansions `json:"expansions,omitempty"`
}

// PlanExpansions is what a run's expansions do: the installer hooks they run
// and at which step, and the steps and checks they skip or delegate.
type PlanExpansions struct {
	// Used are the expansions merged, as NAME@VERSION (LOCATION).
	Used []string `json:"used"`
	// Hooks are their installer hooks in the order they run at each point.
	Hooks []PlanHook `json:"hooks,omitempty"`
	// Skipped are the steps and checks they skip or delegate.
	Skipped []PlanSkip `json:"skipped,omitempty"`
}

// PlanHook is one installer hook of an expansion.
type PlanHook struct {
	Expansion string `json:"expansion"`
	Name      string `json:"name"`
	// At is the hook point (beforeCluster, controlPlaneReady, afterInstall)
	// and Step when the run reaches it ("after step connect").
	At   string `json:"at"`
	Step string `json:"step"`
	// Run is the script (a path in the expansion) or the command.
	Run string `json:"run"`
}

// PlanSkip is a step or check an expansion skips, or a check it delegates.
type PlanSkip struct {
	Expansion string `json:"expansion"`
	// What is "step", "check" (skipConditions) or "delegated" (delegateConditions).
	What string `json:"what"`
	Name string `json:"name"`
	// To says, for a delegated check, who proves it instead.
	To string `json:"to,omitempty"`
}

// PlanLock is what the lock file beside the cluster file says of a plan.
type PlanLock struct {
	// File is the lock file's path.
	File string `json:"file"`
	// Changes say how the lock file would change to pin the plan (a plugin
	// enabled or dropped since it was written, a locked version the cluster
	// file's constraints no longer admit, a plugin updated), one per plugin,
	// sorted; none when it pins the plan as it is.
	Changes []string `json:"changes,omitempty"`
}

// PlanPlugin is one resolved plugin.
type PlanPlugin struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Origin  string `json:"origin"`
	Digest  string `json:"digest"`
	Wave    int    `json:"wave"`
	// After names the plugins this one waits for (its dependencies and
	// ordering hints), sorted; all are in earlier waves. They are the edges of
	// the plan's graph (kubeplug plan --graph).
	After []string `json:"after,omitempty"`
	// Enabled is false for plugins only pulled in by another plugin's requires.
	Enabled bool `json:"enabled"`
	// LessTested marks a plugin of the contrib directory: contributed plugins
	// are tested less than the built-in ones, and plan and up say so.
	LessTested bool `json:"lessTested,omitempty"`
	// Locked is the version the cluster file's lock file pins, when it pins
	// one (set by the caller that read it): Version is that version unless the
	// cluster's constraints exclude it or the run updates the lock.
	Locked string `json:"locked,omitempty"`
	// Newer is the version the plugin would have without the lock (a version
	// published after it was written, which the constraints admit): updating
	// the lock takes it. Empty when Version is already that one.
	Newer string `json:"newer,omitempty"`
	// Charts are the charts the plugin's Helm releases name by reference, as
	// they were resolved and fetched (set by the caller that fetched them).
	Charts []PlanChart `json:"charts,omitempty"`
}

// PlanChart is a chart by reference of a plugin's Helm release: the chart as the
// release names it (without version), the version it resolved to and the sha256
// of its archive.
type PlanChart struct {
	Chart   string `json:"chart"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

// ContributionRef names one construct and the plugin that contributed it.
type ContributionRef struct {
	Plugin string `json:"plugin"`
	// Kind is the construct's kind, for example controlPlane.flag or kubernetes.object.
	Kind string `json:"kind"`
	// Key locates the construct, for example kube-apiserver/oidc-issuer-url.
	Key string `json:"key"`
}

// Doc summarises the plan and, when m is not nil, the contributions in m.
func (p *Plan) Doc(m *model.Model) *PlanDoc {
	d := &PlanDoc{Cluster: p.Cluster.Spec.Metadata.Name, KubernetesVersion: p.Cluster.KubernetesVersion.String(), Plugins: []PlanPlugin{}, Waves: [][]string{}, Contributions: []ContributionRef{}}
	enabled := map[string]bool{}
	for _, r := range p.Cluster.Enabled() {
		enabled[r.Name] = true
	}
	rank := map[string]int{}
	for _, w := range p.Waves {
		var names []string
		for _, pl := range w {
			rank[pl.Package.Name] = len(d.Plugins)
			d.Plugins = append(d.Plugins, PlanPlugin{
				Name: pl.Package.Name, Version: pl.Package.Version.String(), Origin: pl.Package.Origin.Name,
				Digest: pl.Package.Digest, Wave: pl.Wave, After: pl.After, Enabled: enabled[pl.Package.Name],
				Newer: p.Newer[pl.Package.Name], LessTested: pl.Package.Origin == plugin.OriginContrib,
			})
			names = append(names, pl.Package.Name)
		}
		d.Waves = append(d.Waves, names)
	}
	if m == nil {
		return d
	}
	d.Contributions = Contributions(m)
	slices.SortStableFunc(d.Contributions, func(a, b ContributionRef) int {
		ra, oka := rank[a.Plugin]
		rb, okb := rank[b.Plugin]
		if !oka {
			ra = -1 // the cluster file's own contributions come first
		}
		if !okb {
			rb = -1
		}
		return cmp.Or(cmp.Compare(ra, rb), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Key, b.Key))
	})
	return d
}

// Contributions lists every construct in the model with the plugin that set it.
//
// Branches: one loop per kind of construct the model holds (component flags and
// volumes, feature gates, each pool's files, units, kubelet flags and labels,
// ...), in the order the plan lists them; each loop is two lines.
func Contributions(m *model.Model) []ContributionRef {
	var out []ContributionRef
	add := func(by, kind string, key ...string) {
		out = append(out, ContributionRef{Plugin: by, Kind: kind, Key: strings.Join(key, "/")})
	}
	for _, name := range model.Components {
		c := m.ControlPlane.Components[name]
		for _, k := range slices.Sorted(maps.Keys(c.Flags)) {
			add(c.Flags[k].By, "controlPlane.flag", name, k)
		}
		for _, k := range slices.Sorted(maps.Keys(c.Volumes)) {
			add(c.Volumes[k].By, "controlPlane.volume", name, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.ControlPlane.FeatureGates)) {
		add(m.ControlPlane.FeatureGates[k].By, "controlPlane.featureGate", k)
	}
	for _, pn := range m.PoolNames() {
		p := m.Pools[pn]
		for _, k := range slices.Sorted(maps.Keys(p.Files)) {
			// POOL:/PATH: the path is absolute, so a "/" would double.
			add(p.Files[k].By, "nodes.file", pn+":"+k)
		}
		for _, k := range slices.Sorted(maps.Keys(p.Units)) {
			u := p.Units[k]
			if u.Content != "" {
				add(u.By, "nodes.systemdUnit", pn, k)
			}
			if u.Mask {
				add(u.By, "nodes.maskedUnit", pn, k)
			}
			for _, di := range slices.Sorted(maps.Keys(u.DropIns)) {
				add(u.DropIns[di].By, "nodes.dropIn", pn, k, di)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(p.Kubelet.Flags)) {
			add(p.Kubelet.Flags[k].By, "nodes.kubeletFlag", pn, k)
		}
		for _, k := range slices.Sorted(maps.Keys(p.Kubelet.Labels)) {
			add(p.Kubelet.Labels[k].By, "nodes.label", pn, k)
		}
		for _, k := range slices.Sorted(maps.Keys(p.Kubelet.FeatureGates)) {
			add(p.Kubelet.FeatureGates[k].By, "nodes.featureGate", pn, k)
		}
		for _, t := range p.Kubelet.Taints {
			add(t.By, "nodes.taint", pn, t.Key+":"+t.Effect)
		}
		for _, h := range p.Hooks {
			add(h.By, "nodes.hook", pn, h.At, h.Name)
		}
	}
	for _, kp := range m.KeyPairs {
		for _, pn := range kp.Pools {
			add(kp.By, "nodes.keyPair", pn, kp.Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Cloud.Resources)) {
		add(m.Cloud.Resources[k].By, "cloud.resource", k)
	}
	for _, k := range slices.Sorted(maps.Keys(m.Cloud.Outputs)) {
		add(m.Cloud.Outputs[k].By, "cloud.output", k)
	}
	for _, k := range slices.Sorted(maps.Keys(m.Cloud.Stacks)) {
		add(m.Cloud.Stacks[k].By, "cloud.stack", k)
	}
	for _, role := range slices.Sorted(maps.Keys(m.Cloud.IAM)) {
		for _, s := range m.Cloud.IAM[role] {
			add(s.By, "cloud.iamStatement", role)
		}
	}
	for _, p := range m.Cloud.Patches {
		for _, op := range p.Ops {
			add(p.By, "cloud.patch", op.Op+" "+op.Path)
		}
	}
	for _, p := range m.Cloud.Pools {
		sel := poolSelector(p)
		for _, sec := range []struct {
			kind  string
			names []string
		}{
			{"cloud.pool.iamStatement", slices.Sorted(maps.Keys(p.IAM))},
			{"cloud.pool.tag", slices.Sorted(maps.Keys(p.Tags))},
			{"cloud.pool.securityGroupIngress", slices.Sorted(maps.Keys(p.SecurityGroupIngress))},
			{"cloud.pool.launchTemplate", slices.Sorted(maps.Keys(p.LaunchTemplate))},
		} {
			for _, n := range sec.names {
				add(p.By, sec.kind, sel, n)
			}
		}
		for _, op := range p.Patches {
			add(p.By, "cloud.pool.patch", sel, op.Op+" "+op.Path)
		}
	}
	for _, o := range m.Kubernetes.Objects {
		add(o.By, "kubernetes.object", model.ObjectKey(o.Object))
	}
	for _, h := range m.Kubernetes.HelmReleases {
		add(h.By, "kubernetes.helmRelease", h.Namespace, h.Name)
	}
	for _, p := range m.Kubernetes.Patches {
		add(p.By, "kubernetes.patch", p.Target.Kind, p.Target.Namespace, p.Target.Name)
	}
	return out
}

// poolSelector names the pools a cloud.pools[] part selects, for the plan:
// "role=worker", "pool=gpu-*", both joined by ",", or "*".
func poolSelector(p model.PoolPart) string {
	var sel []string
	if p.Role != "" {
		sel = append(sel, "role="+p.Role)
	}
	if p.Pool != "" {
		sel = append(sel, "pool="+p.Pool)
	}
	if len(sel) == 0 {
		return "*"
	}
	return strings.Join(sel, ",")
}
