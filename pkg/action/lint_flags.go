package action

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// flagField is the field of a diagnostic about a flag of a plugin's
// contribution, as Plan.locate names it.
var flagField = regexp.MustCompile(`^spec\.contributes\.(?:controlPlane\.(etcd|apiServer|controllerManager|scheduler)|nodes\[(\d+)\]\.kubelet)\.flags\.(.+)$`)

// sampleFlagValue makes d, render's error about the value of a flag of pkg, a
// warning when plugin.yaml writes the value as a template: lint renders with
// the plugin's default values, and a cluster's own values decide what the flag
// is (render and plan refuse it there). An unknown flag, or a value written
// as is, stays an error.
func sampleFlagValue(pkg *plugin.Package, d diag.Diagnostic) diag.Diagnostic {
	m := flagField.FindStringSubmatch(d.Field)
	if m == nil || d.Severity != diag.Fatal || strings.Contains(d.Message, " has no flag --") || pkg.Manifest.Spec.Contributes == nil {
		return d
	}
	c := pkg.Manifest.Spec.Contributes
	var flags map[string]string
	switch {
	case m[1] != "" && c.ControlPlane != nil:
		if comp := map[string]func() map[string]string{
			"etcd":              func() map[string]string { return flagsOf(c.ControlPlane.Etcd) },
			"apiServer":         func() map[string]string { return flagsOf(c.ControlPlane.APIServer) },
			"controllerManager": func() map[string]string { return flagsOf(c.ControlPlane.ControllerManager) },
			"scheduler":         func() map[string]string { return flagsOf(c.ControlPlane.Scheduler) },
		}[m[1]]; comp != nil {
			flags = comp()
		}
	case m[2] != "":
		if i, err := strconv.Atoi(m[2]); err == nil && i < len(c.Nodes) && c.Nodes[i].Kubelet != nil {
			flags = c.Nodes[i].Kubelet.Flags
		}
	}
	if v, ok := flags[m[3]]; ok && strings.Contains(v, "{{") {
		d.Severity = diag.Warning
		d.Message += " (with the plugin's default values)"
	}
	return d
}

func flagsOf(c *v1alpha1.Component) map[string]string {
	if c == nil {
		return nil
	}
	return c.Flags
}
