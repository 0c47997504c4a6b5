package local

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/internal/controlplane"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// controlPlaneFlags turns the model's control-plane flags, volumes and feature
// gates into the local control plane's flags, with every path on the
// control-plane machine moved under root (see the package doc). It creates the
// volumes' host directories and the parent directories of rewritten paths under
// root, so that a flag naming a file to write (an audit log) works.
func controlPlaneFlags(m *model.Model, root string) (controlplane.Flags, error) {
	gates := map[string]bool{}
	for g, s := range m.ControlPlane.FeatureGates {
		gates[g] = s.Value
	}
	per := map[string]map[string]string{}
	for _, name := range model.Components {
		c := m.ControlPlane.Components[name]
		flags := map[string]string{}
		per[name] = flags
		if c == nil {
			continue
		}
		for vn, v := range c.Volumes {
			host := underRoot(root, v.HostPath)
			if fi, err := os.Stat(host); err == nil && !fi.IsDir() {
				continue // a file of the machine mounted as a file
			}
			if err := os.MkdirAll(host, 0o755); err != nil {
				return controlplane.Flags{}, fmt.Errorf("controlPlane.%s.volumes.%s (plugin %s): create %s: %w", name, vn, v.By, host, err)
			}
		}
		for f, s := range c.Flags {
			f = strings.TrimLeft(f, "-")
			if f == "feature-gates" {
				// The renderer merged and checked these against the gates.
				for _, kv := range strings.Split(s.Value, ",") {
					k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
					if b, err := strconv.ParseBool(v); err == nil && k != "" {
						gates[k] = b
					}
				}
				continue
			}
			value, rewritten := machinePath(s.Value, c.Volumes, root)
			if rewritten {
				if err := os.MkdirAll(filepath.Dir(value), 0o755); err != nil {
					return controlplane.Flags{}, fmt.Errorf("controlPlane.%s.flags.%s (plugin %s): create the directory of %s: %w", name, f, s.By, value, err)
				}
			}
			flags[f] = value
		}
	}
	if len(gates) == 0 {
		gates = nil
	}
	return controlplane.Flags{
		APIServerFlags:         per[model.KubeAPIServer],
		ControllerManagerFlags: per[model.KubeControllerManager],
		SchedulerFlags:         per[model.KubeScheduler],
		FeatureGates:           gates,
	}, nil
}

// machinePath maps a flag value that is a clean absolute path on the
// control-plane machine under root: through the volume whose mountPath holds it
// (the longest) to its hostPath, else as it is. Any other value is unchanged.
func machinePath(v string, volumes map[string]model.Volume, root string) (string, bool) {
	if !strings.HasPrefix(v, "/") || path.Clean(v) != v || strings.ContainsAny(v, ",= \t\n") {
		return v, false
	}
	host, best := v, -1
	for _, vol := range volumes {
		mp := path.Clean(vol.MountPath)
		if (v == mp || strings.HasPrefix(v, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > best {
			host, best = path.Join(vol.HostPath, strings.TrimPrefix(v, mp)), len(mp)
		}
	}
	return underRoot(root, host), true
}
