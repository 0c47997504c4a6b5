package local

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// Facts about the control-plane machine that are the same on every local
// cluster; the ports are chosen per cluster (see Provider.Facts). The paths are
// paths on the control-plane machine, under its root in the state directory.
const (
	factAddress     = "127.0.0.1"
	factPKIDir      = "/etc/kubernetes/pki"
	factKubeconfig  = "/etc/kubernetes/admin.conf"
	factEtcdDataDir = "/var/lib/etcd"
	// The member name local clusters had before etcd's flags came from the
	// control-plane plugin, kept so that their data directories stay theirs.
	factEtcdName = "kubeplug"
)

// Facts returns the facts about the control-plane machine that the built-in
// control-plane plugin reads from its "machine" value (see its values schema):
// the loopback address, the components' ports, the etcd servers, and where the
// certificates and the components' kubeconfig are on the machine. The ports are
// those of the running cluster, else the ones it had (the API server's from
// Options.APIServerPort if set), else free ones; Up starts the control plane on
// the ports of the last Facts. With the control plane on a machine (its pool in
// MachinePools), the facts are that machine's: its address in the node network,
// kubeadm's ports. Facts starts nothing.
//
// A state directory of another version is an error wrapping
// provider.ErrIncompatibleState, a fixed API server port in use one wrapping
// controlplane.ErrPortInUse that names the process holding it.
func (p *Provider) Facts() (map[string]any, error) {
	if _, err := readState(p.opts.StateDir); err != nil {
		return nil, err
	}
	if p.cpMachine() {
		// The control-plane machine's address: the first of the node
		// network its state records, or of the one Up will record.
		network, err := p.machineNetwork(context.Background())
		if err != nil {
			return nil, err
		}
		p.cpNet = &network
		return machineFacts(network.NodeIP(cpMachineIndex).String()), nil
	}
	ports, err := controlplane.ChoosePorts(p.cpOptions())
	if err != nil {
		return nil, incompatible(p.opts.StateDir, fmt.Errorf("choose the control plane's ports: %w", err))
	}
	p.ports = &ports
	return factsOf(ports), nil
}

func factsOf(ports controlplane.Ports) map[string]any {
	return map[string]any{
		"address": factAddress,
		"ports": map[string]any{
			"apiServer":         ports.Components[controlplane.APIServer],
			"controllerManager": ports.Components[controlplane.ControllerManager],
			"scheduler":         ports.Components[controlplane.Scheduler],
		},
		"etcdServers": "http://" + factAddress + ":" + strconv.Itoa(ports.Components[controlplane.Etcd]),
		"etcd": map[string]any{
			"name": factEtcdName, "dataDir": factEtcdDataDir,
			"clientPort": ports.Components[controlplane.Etcd], "peerPort": ports.EtcdPeer,
			// A throw-away cluster on one disk: fsync would cost seconds per apply.
			"fsync": false,
		},
		"pkiDir":     factPKIDir,
		"kubeconfig": factKubeconfig,
		// One user on loopback: per-controller service accounts would only hold
		// the controllers' start (and so every Deployment's first Pod) by ~5 s.
		"perControllerCredentials": false,
	}
}

// staticPodArgs returns the command lines of etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler: the commands of their rendered
// static Pods (render.StaticPodDir on the control-plane machine m) without the
// binary, each path on the machine moved under root by machinePath. It creates
// the volumes' host directories and the parent directories of rewritten paths
// under root, so that a flag naming a file to write (an audit log) works.
func staticPodArgs(m *render.Machine, root string) (map[controlplane.Component][]string, error) {
	files := map[string][]byte{}
	if m != nil {
		for _, f := range m.Files {
			files[f.Path] = f.Content
		}
	}
	out := map[controlplane.Component][]string{}
	for _, name := range model.Components {
		file := path.Join(render.StaticPodDir, name+".yaml")
		b, ok := files[file]
		if !ok {
			return nil, fmt.Errorf("control-plane machine: no static Pod %s for %s", file, name)
		}
		var pod corev1.Pod
		if err := yaml.Unmarshal(b, &pod); err != nil {
			return nil, fmt.Errorf("control-plane machine: decode static Pod %s: %w", file, err)
		}
		if len(pod.Spec.Containers) != 1 || len(pod.Spec.Containers[0].Command) == 0 || pod.Spec.Containers[0].Command[0] != name {
			return nil, fmt.Errorf("control-plane machine: static Pod %s: expected one container running %s", file, name)
		}
		volumes, err := podVolumes(&pod, file, root)
		if err != nil {
			return nil, err
		}
		args, err := machineArgs(pod.Spec.Containers[0].Command[1:], volumes, file, root)
		if err != nil {
			return nil, err
		}
		out[controlplane.Component(name)] = args
	}
	return out, nil
}

// podVolumes maps the mount paths of the static Pod pod's (in file) host-path
// volumes to their host paths, and creates those under root that are not
// files of the machine.
func podVolumes(pod *corev1.Pod, file, root string) (map[string]string, error) {
	volumes := map[string]string{} // mountPath -> hostPath
	for _, v := range pod.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		for _, vm := range pod.Spec.Containers[0].VolumeMounts {
			if vm.Name == v.Name {
				volumes[vm.MountPath] = v.HostPath.Path
			}
		}
		host := underRoot(root, v.HostPath.Path)
		if fi, err := os.Stat(host); err == nil && !fi.IsDir() {
			continue // a file of the machine mounted as a file
		}
		if err := os.MkdirAll(host, 0o755); err != nil {
			return nil, fmt.Errorf("static Pod %s: volume %s: create %s: %w", file, v.Name, host, err)
		}
	}
	return volumes, nil
}

// machineArgs are the arguments of a static Pod's (in file) command with
// each path on the machine moved under root by machinePath, the parent
// directories of rewritten paths created.
func machineArgs(command []string, volumes map[string]string, file, root string) ([]string, error) {
	var args []string
	for _, arg := range command {
		flag, value, ok := strings.Cut(arg, "=")
		if ok {
			var rewritten bool
			if value, rewritten = machinePath(value, volumes, root); rewritten {
				if err := os.MkdirAll(filepath.Dir(value), 0o755); err != nil {
					return nil, fmt.Errorf("static Pod %s: %s: create the directory of %s: %w", file, flag, value, err)
				}
			}
			arg = flag + "=" + value
		}
		args = append(args, arg)
	}
	return args, nil
}

// machinePath maps a flag value that is a clean absolute path on the
// control-plane machine under root: through the volume whose mountPath holds it
// (the longest) to its hostPath, else as it is. Any other value is unchanged.
func machinePath(v string, volumes map[string]string, root string) (string, bool) {
	if !strings.HasPrefix(v, "/") || path.Clean(v) != v || strings.ContainsAny(v, ",= \t\n") {
		return v, false
	}
	host, best := v, -1
	for mount, hostPath := range volumes {
		mp := path.Clean(mount)
		if (v == mp || strings.HasPrefix(v, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > best {
			host, best = path.Join(hostPath, strings.TrimPrefix(v, mp)), len(mp)
		}
	}
	return underRoot(root, host), true
}

// flagValue returns the value of --name in args.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}
