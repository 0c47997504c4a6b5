package render

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// Names of what the renderer adds to every machine.
const (
	// kubeletDropIn points the kubelet at its flags in KubeletEnvPath.
	kubeletUnit   = "kubelet.service"
	kubeletDropIn = "10-kubeplug.conf"
	// bootUnit runs `kubeplug node boot` on every start of the machine: the
	// beforeNodeup hooks, the kubelet, the afterNodeup hooks. afterDeployPath starts
	// afterDeployUnit, the afterDeploy phase, when the deploy writes
	// AfterDeployTriggerPath. Both node formats write all three.
	bootUnit        = "kubeplug-boot.service"
	afterDeployUnit = "kubeplug-after-deploy.service"
	afterDeployPath = "kubeplug-after-deploy.path"
	unitDir         = "/etc/systemd/system"
)

// Hook entry points the node agent runs at boot; afterDeploy is triggered by the deploy.
const (
	PhaseBeforeNodeup = hookspec.PhaseBeforeNodeup
	PhaseAfterNodeup  = hookspec.PhaseAfterNodeup
	PhaseAfterDeploy  = hookspec.PhaseAfterDeploy
)

var (
	unitRE   = regexp.MustCompile(`^[A-Za-z0-9:_.\\@-]+\.(service|socket|target|timer|mount|automount|path|slice|swap|device|scope)$`)
	dropInRE = regexp.MustCompile(`^[A-Za-z0-9:_.@-]+\.conf$`)
	modeRE   = regexp.MustCompile(`^0?[0-7]{3,4}$`)
	effects  = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}
	phases   = []string{PhaseBeforeNodeup, PhaseAfterNodeup, PhaseAfterDeploy}
	// safeArgRE is what a kubelet flag value may hold: the systemd environment file and
	// the unquoted $KUBELET_ARGS split on whitespace and treat quotes, '\' and '$'
	// specially, so those are refused instead of escaped.
	safeArgRE = regexp.MustCompile(`^[^\s"'\\$]*$`)
)

// machine is the configuration of one pool's machines, independent of the format
// (cloud-init or Ignition) it is written in.
type machine struct {
	pool  string
	files []machineFile // sorted by path
	units []machineUnit // sorted by name
}

type machineFile struct {
	path    string
	mode    int64 // permission bits
	owner   string
	content string
}

type machineUnit struct {
	name    string
	content string // empty for a unit the machine already has
	enable  bool
	mask    bool            // stopped and masked: a unit the OS has, kept from starting
	dropIns []machineDropIn // sorted by name
}

type machineDropIn struct{ name, content string }

func (r *renderer) nodes(ctx context.Context) {
	for _, name := range r.in.Model.PoolNames() {
		if ctx.Err() != nil {
			return
		}
		m, ok := r.machine(r.in.Model.Pools[name])
		if !ok {
			continue
		}
		dir := "nodes/" + name + "/"
		if b, ok := r.cloudInit(m); ok {
			r.out[dir+"cloud-init.yaml"] = b
		}
		if b, ok := r.ignition(m); ok {
			r.out[dir+"ignition.json"] = b
		}
	}
}

// machine collects everything a pool's machines get; ok is false after a fatal
// diagnostic. Two sources writing one path is fatal, naming both. Its steps:
// the plugins' files, their units, kubeplug's own units, the hooks manifest,
// the kubelet's environment and unit, and the control plane's static Pods.
func (r *renderer) machine(p *model.Pool) (*machine, bool) {
	before := len(r.diags.Fatal())
	b := &machineBuild{r: r, p: p, base: "nodes." + p.Name, m: &machine{pool: p.Name}, owners: map[string]string{}, units: map[string]*machineUnit{}}
	b.files()
	b.pluginUnits()
	b.ownUnits()
	b.hooksManifest()
	b.kubelet()
	b.staticPods()
	for _, un := range sortedKeys(b.units) {
		b.m.units = append(b.m.units, *b.units[un])
	}
	sortFiles(b.m.files)
	return b.m, len(r.diags.Fatal()) == before
}

// machineBuild is one pool's machine being collected: who wrote each
// machine path so far, and the units by name.
type machineBuild struct {
	r      *renderer
	p      *model.Pool
	base   string
	m      *machine
	owners map[string]string // machine path -> who wrote it
	units  map[string]*machineUnit
}

// claim records that by writes path; a second writer is fatal, naming both.
func (b *machineBuild) claim(by, field, path string) bool {
	if prev, ok := b.owners[path]; ok {
		b.r.fatalf(by, field, "%s is written by both %s and %s", path, describe(prev), describe(by))
		return false
	}
	b.owners[path] = by
	return true
}

// addFile adds a kubeplug-written root:root file at path when it is free.
func (b *machineBuild) addFile(field, path string, mode int64, content string) {
	if b.claim("", field, path) {
		b.m.files = append(b.m.files, machineFile{path: path, mode: mode, owner: "root:root", content: content})
	}
}

// files adds the plugins' node files, with their content or downloaded bytes.
func (b *machineBuild) files() {
	for _, fp := range sortedKeys(b.p.Files) {
		f := b.p.Files[fp]
		field := b.base + ".files." + fp
		if !path.IsAbs(fp) || path.Clean(fp) != fp {
			b.r.fatalf(f.By, field, "expected a clean absolute path, found %q", fp)
			continue
		}
		if !modeRE.MatchString(f.Mode) {
			b.r.fatalf(f.By, field+".mode", "expected an octal mode like 0644, found %q", f.Mode)
			continue
		}
		mode, _ := strconv.ParseInt(f.Mode, 8, 32)
		content := f.Content
		if f.URL != "" {
			got, ok := b.r.urlFile(f, field)
			if !ok {
				continue
			}
			content = string(got)
		}
		if b.claim(f.By, field, fp) {
			b.m.files = append(b.m.files, machineFile{path: fp, mode: mode, owner: f.Owner, content: content})
		}
	}
}

// pluginUnits adds the plugins' systemd units and drop-ins.
func (b *machineBuild) pluginUnits() {
	for _, un := range sortedKeys(b.p.Units) {
		u := b.p.Units[un]
		field := b.base + ".units." + un
		if !unitRE.MatchString(un) {
			b.r.fatalf(u.By, field, "expected a systemd unit name like foo.service, found %q", un)
			continue
		}
		mu := &machineUnit{name: un, content: u.Content, enable: u.Enable, mask: u.Mask}
		if u.Mask && (slices.ContainsFunc(agentUnits(), func(au machineUnit) bool { return au.name == un }) || un == kubeletUnit) {
			b.r.fatalf(u.By, field+".mask", "unit %s is kubeplug's own; it cannot be masked", un)
			continue
		}
		if u.Content != "" && !b.claim(u.By, field, path.Join(unitDir, un)) {
			continue
		}
		for _, dn := range sortedKeys(u.DropIns) {
			d := u.DropIns[dn]
			if !dropInRE.MatchString(dn) {
				b.r.fatalf(d.By, field+".dropIns."+dn, "expected a drop-in file name like 10-foo.conf, found %q", dn)
				continue
			}
			if b.claim(d.By, field+".dropIns."+dn, path.Join(unitDir, un+".d", dn)) {
				mu.dropIns = append(mu.dropIns, machineDropIn{name: dn, content: d.Value})
			}
		}
		b.units[un] = mu
	}
}

// ownUnits adds the agent's units, kubeplug's on every machine, with the
// boot's step that fetches the provider's part of the boot when it has one.
func (b *machineBuild) ownUnits() {
	for _, au := range agentUnits() {
		if b.claim("", b.base+".units."+au.name, path.Join(unitDir, au.name)) {
			b.units[au.name] = &au
		}
	}
	if u := b.units[bootUnit]; u != nil && b.r.in.BootSecrets != nil {
		if url := b.r.in.BootSecrets(b.p.Name); url != "" {
			u.dropIns = append(u.dropIns, bootSecretsDropIn(url))
		}
	}
}

// hooksManifest adds the hooks' scripts and the manifest the node agent
// reads: the facts hooks' `when` conditions see (the node's own name it
// learns on the machine). Its format is the agent's Manifest, so writer and
// reader cannot drift apart.
func (b *machineBuild) hooksManifest() {
	hooks := b.r.hooks(b.p, func(h model.Hook, scriptPath string) bool {
		return b.claim(h.By, b.base+".hooks."+h.Name, scriptPath)
	}, b.m)
	labels := map[string]string{}
	for k, v := range b.p.Kubelet.Labels {
		labels[k] = v.Value
	}
	facts := hookspec.Manifest{
		Cluster: &hookspec.Cluster{Name: b.r.in.ClusterName, KubernetesVersion: strings.TrimPrefix(b.r.in.KubernetesVersion, "v")},
		Node:    &hookspec.Node{Pool: b.p.Name, Role: b.p.Role, Labels: labels},
		Hooks:   hooks,
	}
	raw, err := marshalJSON(facts)
	if err != nil {
		b.r.fatalf("", b.base+".hooks", "encoding the hooks manifest: %v", err)
		return
	}
	b.addFile(b.base+".hooks", HooksManifestPath, 0o644, string(raw))
}

// kubelet adds the kubelet's environment and its unit's drop-in.
func (b *machineBuild) kubelet() {
	if env, ok := b.r.kubeletEnv(b.p); ok {
		b.addFile(b.base+".kubelet", KubeletEnvPath, 0o644, env)
	}
	ku := b.units[kubeletUnit]
	if ku == nil {
		ku = &machineUnit{name: kubeletUnit}
		b.units[kubeletUnit] = ku
	}
	// Only the boot starts the kubelet (the nodeup step), after the beforeNodeup hooks:
	// enabled, it would start on its own before them. A plugin cannot enable it.
	ku.enable = false
	if b.claim("", b.base+".kubelet", path.Join(unitDir, kubeletUnit+".d", kubeletDropIn)) {
		ku.dropIns = append(ku.dropIns, machineDropIn{name: kubeletDropIn, content: kubeletDropInContent})
		slices.SortFunc(ku.dropIns, func(a, b machineDropIn) int { return strings.Compare(a.name, b.name) })
	}
}

// staticPods adds the control plane's static Pods to its pool's machines,
// 0600: the kubelet is the only reader and flags may carry secrets' paths.
func (b *machineBuild) staticPods() {
	if b.p.Name != model.ControlPlanePool {
		return
	}
	for _, c := range model.Components {
		if raw, ok := b.r.out["control-plane/"+c+".yaml"]; ok {
			b.addFile(b.base+".staticPods", path.Join(StaticPodDir, c+".yaml"), 0o600, string(raw))
		}
	}
}

// urlFile returns the downloaded bytes of a node file from its URL.
func (r *renderer) urlFile(f model.File, field string) ([]byte, bool) {
	if r.in.URLFile == nil {
		r.fatalf(f.By, field+".url", "%s: files downloaded from a URL are not fetched by this caller", f.URL)
		return nil, false
	}
	b, err := r.in.URLFile(f.URL, f.SHA256)
	if err != nil {
		r.fatalf(f.By, field+".url", "%v", err)
		return nil, false
	}
	return b, true
}

func describe(by string) string {
	if by == "" {
		return "kubeplug"
	}
	return "plugin " + by
}

// hooks installs script hooks and returns the hooks manifest's entries in the model's
// order (plugin order, then declaration order), which is the order the agent runs them.
func (r *renderer) hooks(p *model.Pool, claim func(model.Hook, string) bool, m *machine) []hookspec.Hook {
	entries := []hookspec.Hook{}
	for _, h := range p.Hooks {
		field := "nodes." + p.Name + ".hooks." + h.Name
		switch {
		case !nameRE.MatchString(h.By) || !nameRE.MatchString(h.Name):
			r.fatalf(h.By, field, "hook %q of plugin %q: both names must be lower-case letters, digits, '.', '_' or '-'", h.Name, h.By)
			continue
		case !slices.Contains(phases, h.At):
			r.fatalf(h.By, field+".at", "expected one of %s, found %q", strings.Join(phases, ", "), h.At)
			continue
		case len(h.Command) == 0 && h.Script == "" && h.URL == "":
			r.fatalf(h.By, field, "a hook needs a command, a script or a url")
			continue
		}
		e := hookspec.Hook{Plugin: h.By, Name: h.Name, At: h.At, Command: h.Command, Behavior: h.Behavior, Timeout: h.Timeout, When: h.When,
			URL: h.URL, SHA256: h.SHA256, Before: h.Before, Requires: h.Requires, Once: h.Once}
		if h.Script != "" {
			e.Script = path.Join(HooksDir, h.By, h.Name)
			if len(e.Command) == 0 {
				e.Command = []string{e.Script}
			}
			if !claim(h, e.Script) {
				continue
			}
			m.files = append(m.files, machineFile{path: e.Script, mode: 0o755, owner: "root:root", content: h.Script})
		}
		entries = append(entries, e)
	}
	return entries
}

// kubeletDropInContent is the drop-in that starts the kubelet with kubeadm's layout —
// its bootstrap kubeconfig, the kubeconfig the TLS bootstrap writes, its configuration
// file — then the provider's per-machine flags (KubeletProviderEnvPath, optional) and the
// plugins' flags from KubeletEnvPath, last so that they win. "$KUBELET_ARGS" (unbraced)
// splits the value into one argument per flag. ConditionPathExists keeps the kubelet
// down on a node the boot marked failed, whoever starts it.
var kubeletDropInContent = "[Unit]\n" +
	"ConditionPathExists=!" + hookspec.FailedMarkerPath + "\n" +
	"\n" +
	"[Service]\n" +
	"EnvironmentFile=-" + KubeletProviderEnvPath + "\n" +
	"EnvironmentFile=" + KubeletEnvPath + "\n" +
	"ExecStart=\n" +
	"ExecStart=" + KubeletPath + " --bootstrap-kubeconfig=" + KubeletBootstrapKubeconfigPath +
	" --kubeconfig=" + KubeletKubeconfigPath + " --config=" + KubeletConfigPath +
	" $KUBELET_PROVIDER_ARGS $KUBELET_ARGS\n"

// kubeletEnv renders the kubelet's flags as a systemd environment file: flags sorted by
// name, labels as --node-labels and taints as --register-with-taints, both sorted.
func (r *renderer) kubeletEnv(p *model.Pool) (string, bool) {
	base := "nodes." + p.Name + ".kubelet"
	k := p.Kubelet
	ok := true
	flags := map[string]model.Setting[string]{}
	for _, f := range sortedKeys(k.Flags) {
		s := k.Flags[f]
		if !flagRE.MatchString(f) {
			r.fatalf(s.By, base+".flags."+f, "flag name %q must be letters, digits, '.', '_' or '-' without leading dashes", f)
			ok = false
			continue
		}
		flags[f] = s
	}
	gates, gok := r.mergeGates(base, k.FeatureGates, flags["feature-gates"])
	ok = ok && gok
	if gates != "" {
		flags["feature-gates"] = model.Setting[string]{Value: gates}
	}
	if len(k.Labels) > 0 {
		if s, set := flags["node-labels"]; set {
			r.fatalf(s.By, base+".flags.node-labels", "set node labels as kubelet labels, not as the node-labels flag, so they merge with other plugins' labels")
			ok = false
		}
		labels, lok := r.labelsFlag(base, k.Labels)
		ok = ok && lok
		flags["node-labels"] = model.Setting[string]{Value: labels}
	}
	if len(k.Taints) > 0 {
		if s, set := flags["register-with-taints"]; set {
			r.fatalf(s.By, base+".flags.register-with-taints", "set taints as kubelet taints, not as the register-with-taints flag, so they merge with other plugins' taints")
			ok = false
		}
		taints, tok := r.taintsFlag(base, k.Taints)
		ok = ok && tok
		flags["register-with-taints"] = model.Setting[string]{Value: taints}
	}
	args := make([]string, 0, len(flags))
	for _, f := range sortedKeys(flags) {
		s := flags[f]
		if !safeArgRE.MatchString(s.Value) {
			r.fatalf(s.By, base+".flags."+f, "a kubelet flag value may not hold whitespace, quotes, '\\' or '$'")
			ok = false
			continue
		}
		args = append(args, "--"+f+"="+s.Value)
	}
	return "# Written by kubeplug: the kubelet's flags, read by " + kubeletUnit + ".d/" + kubeletDropIn + ".\n" +
		"KUBELET_ARGS=" + strings.Join(args, " ") + "\n", ok
}

// labelsFlag is the kubelet's --node-labels value for labels, sorted; an
// invalid label is fatal (at base's labels), and ok false.
func (r *renderer) labelsFlag(base string, labels map[string]model.Setting[string]) (string, bool) {
	ok := true
	var parts []string
	for _, l := range sortedKeys(labels) {
		s := labels[l]
		if errs := append(content.IsLabelKey(l), content.IsLabelValue(s.Value)...); len(errs) > 0 {
			r.fatalf(s.By, base+".labels."+l, "invalid label %s=%s: %s", l, s.Value, strings.Join(errs, "; "))
			ok = false
			continue
		}
		parts = append(parts, l+"="+s.Value)
	}
	return strings.Join(parts, ","), ok
}

// taintsFlag is the kubelet's --register-with-taints value for taints,
// sorted by key and effect; an invalid taint is fatal (at base's taints),
// and ok false.
func (r *renderer) taintsFlag(base string, taints []model.Taint) (string, bool) {
	ok := true
	taints = slices.Clone(taints)
	slices.SortFunc(taints, func(a, b model.Taint) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.Effect, b.Effect)
	})
	var parts []string
	for _, t := range taints {
		errs := content.IsLabelKey(t.Key)
		if t.Value != "" {
			errs = append(errs, content.IsLabelValue(t.Value)...)
		}
		if !slices.Contains(effects, t.Effect) {
			errs = append(errs, fmt.Sprintf("effect must be one of %s", strings.Join(effects, ", ")))
		}
		if len(errs) > 0 {
			r.fatalf(t.By, base+".taints."+t.Key, "invalid taint %s=%s:%s: %s", t.Key, t.Value, t.Effect, strings.Join(errs, "; "))
			ok = false
			continue
		}
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		parts = append(parts, s+":"+t.Effect)
	}
	return strings.Join(parts, ","), ok
}

// agentUnits are the node agent's units, the same in both node formats.
//
// kubeplug-boot.service runs `kubeplug node boot` on every start of the machine,
// which runs the beforeNodeup hooks, starts the kubelet only when no enforced hook
// failed (async hooks do not hold it up), then runs the afterNodeup hooks; see
// nodeagent.Boot. Type=exec: the boot does not hold up multi-user.target, and its
// output goes to the console as well as the journal, so a failed node says why on
// its serial console.
//
// kubeplug-after-deploy.path starts kubeplug-after-deploy.service, the afterDeploy
// phase, whenever the deploy writes hookspec.AfterDeployTriggerPath; never on a
// node the boot marked failed.
func agentUnits() []machineUnit {
	return []machineUnit{
		{name: bootUnit, enable: true, content: "[Unit]\n" +
			"Description=kubeplug boot: node hooks " + PhaseBeforeNodeup + ", the kubelet, node hooks " + PhaseAfterNodeup + "\n" +
			"Wants=network-online.target\n" +
			"After=network-online.target\n" +
			"\n" +
			"[Service]\n" +
			"Type=exec\n" +
			"ExecStart=" + AgentPath + " node boot\n" +
			"StandardOutput=journal+console\n" +
			"StandardError=journal+console\n" +
			"\n" +
			"[Install]\n" +
			"WantedBy=multi-user.target\n"},
		{name: afterDeployPath, enable: true, content: "[Unit]\n" +
			"Description=kubeplug node hooks, phase " + PhaseAfterDeploy + ", when the deploy writes " + hookspec.AfterDeployTriggerPath + "\n" +
			"\n" +
			"[Path]\n" +
			"PathModified=" + hookspec.AfterDeployTriggerPath + "\n" +
			"Unit=" + afterDeployUnit + "\n" +
			"\n" +
			"[Install]\n" +
			"WantedBy=multi-user.target\n"},
		{name: afterDeployUnit, content: "[Unit]\n" +
			"Description=kubeplug node hooks, phase " + PhaseAfterDeploy + "\n" +
			"After=" + bootUnit + " " + kubeletUnit + "\n" +
			"ConditionPathExists=!" + hookspec.FailedMarkerPath + "\n" +
			"\n" +
			"[Service]\n" +
			"Type=oneshot\n" +
			"ExecStart=" + AgentPath + " node run --phase " + PhaseAfterDeploy + "\n" +
			"StandardOutput=journal+console\n" +
			"StandardError=journal+console\n"},
	}
}

// bootSecretsDropIn makes kubeplug-boot.service fetch the machine's boot
// secrets from url (`kubeplug node fetch-secrets`, with the machine's own
// identity) before anything else of the boot: no hook runs and the kubelet
// does not start without them. The fetch waits for an object not there yet
// (a cloud provider uploads it once its stacks are deployed), so the start
// may take as long as that wait.
func bootSecretsDropIn(url string) machineDropIn {
	return machineDropIn{name: BootSecretsDropIn, content: "# Written by kubeplug: the provider's part of the boot, fetched with the machine's own identity.\n" +
		"[Service]\n" +
		"TimeoutStartSec=" + strconv.Itoa(int(BootSecretsWait.Minutes())+5) + "min\n" +
		"ExecStartPre=" + AgentPath + " node fetch-secrets --url " + url + " --wait " + BootSecretsWait.String() + "\n"}
}
