package render

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/model"
)

// flagRE is a command-line flag name without its dashes; anything else would change
// the meaning of the command line.
var flagRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// gateRE is a feature gate name.
var gateRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func (r *renderer) controlPlane(context.Context) {
	for _, name := range model.Components {
		b, ok := r.staticPod(name)
		if ok {
			r.out["control-plane/"+name+".yaml"] = b
		}
	}
}

// staticPod renders a component's static Pod manifest; ok is false after a fatal
// diagnostic.
func (r *renderer) staticPod(name string) ([]byte, bool) {
	c := r.in.Model.ControlPlane.Components[name]
	if c == nil {
		c = &model.Component{}
	}
	field := "controlPlane." + name
	flags := map[string]model.Setting[string]{}
	for _, f := range sortedKeys(c.Flags) {
		if !flagRE.MatchString(f) {
			r.fatalf(c.Flags[f].By, field+".flags."+f, "flag name %q must be letters, digits, '.', '_' or '-' without leading dashes", f)
			continue
		}
		flags[f] = c.Flags[f]
	}
	// Kubernetes' feature gates are for Kubernetes' components: etcd has gates of
	// its own, which a plugin sets as its feature-gates flag.
	cpGates := r.in.Model.ControlPlane.FeatureGates
	if name == model.Etcd {
		cpGates = nil
	}
	gates, ok := r.mergeGates(field, cpGates, flags["feature-gates"])
	if !ok {
		return nil, false
	}
	if gates != "" {
		flags["feature-gates"] = model.Setting[string]{Value: gates}
	}
	command := []any{name}
	for _, f := range sortedKeys(flags) {
		command = append(command, "--"+f+"="+flags[f].Value)
	}
	mounts, volumes := r.podVolumes(field, c.Volumes)
	image := "registry.k8s.io/" + name + ":v" + r.version
	if name == model.Etcd && r.in.EtcdVersion != "" {
		image = "registry.k8s.io/etcd:" + strings.TrimPrefix(r.in.EtcdVersion, "v") + "-0"
	}
	container := map[string]any{
		"name":    name,
		"image":   image,
		"command": command,
	}
	spec := map[string]any{
		"hostNetwork":       true,
		"priorityClassName": "system-node-critical",
		"containers":        []any{container},
		// The default seccomp profile, as kubeadm sets it for its static Pods.
		"securityContext": map[string]any{"seccompProfile": map[string]any{"type": "RuntimeDefault"}},
	}
	if len(mounts) > 0 {
		container["volumeMounts"] = mounts
		spec["volumes"] = volumes
	}
	pod := map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name":      name,
			"namespace": "kube-system",
			"labels":    map[string]any{"component": name, "tier": "control-plane"},
		},
		"spec": spec,
	}
	b, err := yaml.Marshal(pod)
	if err != nil {
		r.fatalf("", field, "encoding the static Pod: %v", err)
		return nil, false
	}
	return b, !r.diags.HasFatal()
}

// podVolumes are the volume mounts and host-path volumes of a component's
// static Pod (at field) for its volumes; a volume without a lower-case name
// and absolute paths is fatal.
func (r *renderer) podVolumes(field string, vols map[string]model.Volume) (mounts, volumes []any) {
	for _, vn := range sortedKeys(vols) {
		v := vols[vn]
		if !nameRE.MatchString(vn) || v.HostPath == "" || !strings.HasPrefix(v.HostPath, "/") || !strings.HasPrefix(v.MountPath, "/") {
			r.fatalf(v.By, field+".volumes."+vn, "a volume needs a lower-case name and absolute hostPath and mountPath, found name %q, hostPath %q, mountPath %q", vn, v.HostPath, v.MountPath)
			continue
		}
		m := map[string]any{"name": vn, "mountPath": v.MountPath}
		if v.ReadOnly {
			m["readOnly"] = true
		}
		mounts = append(mounts, m)
		volumes = append(volumes, map[string]any{"name": vn, "hostPath": map[string]any{"path": v.HostPath}})
	}
	return mounts, volumes
}

// mergeGates merges feature gates with a feature-gates flag set directly (a plugin may
// do either) into the flag's value "A=true,B=false", sorted by name. A gate set both
// ways to different values is a fatal diagnostic naming both plugins.
func (r *renderer) mergeGates(field string, gates map[string]model.Setting[bool], flag model.Setting[string]) (string, bool) {
	merged := map[string]model.Setting[bool]{}
	for _, g := range sortedKeys(gates) {
		if !gateRE.MatchString(g) {
			r.fatalf(gates[g].By, field+".featureGates."+g, "feature gate name %q must be letters, digits, '.', '_' or '-'", g)
			return "", false
		}
		merged[g] = gates[g]
	}
	if flag.Value != "" {
		for _, kv := range strings.Split(flag.Value, ",") {
			k, v, found := strings.Cut(strings.TrimSpace(kv), "=")
			b, err := strconv.ParseBool(v)
			if !found || err != nil || !gateRE.MatchString(k) {
				r.fatalf(flag.By, field+".flags.feature-gates", "expected Name=true or Name=false, found %q", kv)
				return "", false
			}
			if prev, ok := merged[k]; ok && prev.Value != b {
				r.fatalf(flag.By, field+".flags.feature-gates", "plugins %s and %s set feature gate %s to different values", prev.By, flag.By, k)
				return "", false
			}
			merged[k] = model.Setting[bool]{Value: b, By: flag.By}
		}
	}
	parts := make([]string, 0, len(merged))
	for _, g := range sortedKeys(merged) {
		parts = append(parts, fmt.Sprintf("%s=%t", g, merged[g].Value))
	}
	return strings.Join(parts, ","), true
}
