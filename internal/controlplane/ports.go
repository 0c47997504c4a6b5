package controlplane

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// portKey names a port in state.json: a component's main port, or etcd's peer port.
const etcdPeer = "etcd-peer"

// Ports are the loopback ports of a control plane: every component's main port
// (etcd's client port, the secure ports of kube-apiserver,
// kube-controller-manager and kube-scheduler, kwok's health port) and etcd's
// peer port.
type Ports struct {
	Components map[Component]int
	EtcdPeer   int
}

// ChoosePorts returns the ports Start with opts would use, so that a caller can
// name them in Options.Args before anything starts: the recorded ports of the
// control plane running in opts.DataDir, else the ports Start chooses
// (Options.APIServerPort, a detached cluster's recorded ports while free, free
// ports). Another process may take a free port before Start binds it; Start
// then fails with an error wrapping ErrPortInUse.
func ChoosePorts(opts Options) (Ports, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Ports{}, err
	}
	var st *stateFile
	if opts.DataDir != "" {
		if st, err = readState(opts.DataDir); err != nil {
			return Ports{}, err
		}
	}
	if st != nil && len(st.alive()) > 0 {
		return st.ports(), nil
	}
	return choosePorts(st, opts.APIServerPort, nil)
}

// ports returns the recorded ports.
func (st *stateFile) ports() Ports {
	p := Ports{Components: map[Component]int{}, EtcdPeer: st.Ports[etcdPeer]}
	for _, comp := range startOrder {
		p.Components[comp] = st.Ports[string(comp)]
	}
	return p
}

// choosePorts picks every port: fixed ones (each must be free), else the API
// server's apiServerPort (which must be free), else st's recorded ports while
// free, else free ports.
func choosePorts(st *stateFile, apiServerPort int, fixed *Ports) (Ports, error) {
	want, must := map[string]int{}, map[string]bool{}
	if st != nil {
		maps.Copy(want, st.Ports)
	}
	if apiServerPort != 0 {
		want[string(APIServer)] = apiServerPort
	}
	// The API server keeps its port, so that kubeconfigs stay valid.
	must[string(APIServer)] = want[string(APIServer)] != 0
	if fixed != nil {
		want = map[string]int{etcdPeer: fixed.EtcdPeer}
		for comp, port := range fixed.Components {
			want[string(comp)] = port
		}
		for k := range want {
			must[k] = true
		}
	}
	keys := []string{etcdPeer}
	for _, comp := range startOrder {
		keys = append(keys, string(comp))
	}
	got, err := allocatePorts(keys, want, must)
	if err != nil {
		return Ports{}, fmt.Errorf("choose control plane ports: %w", err)
	}
	out := Ports{Components: map[Component]int{}, EtcdPeer: got[etcdPeer]}
	for _, comp := range startOrder {
		out.Components[comp] = got[string(comp)]
	}
	return out, nil
}

// allocatePorts returns a loopback port for every key. A key in want gets that
// port if it is free; if it is not, a key in fixed fails with an error wrapping
// ErrPortInUse that names the port and, when /proc tells, the process holding it,
// and any other key falls back to a free port. Keys not in want get free ports.
// All ports are held together while choosing, so they are distinct; another
// process could take one before the component binds it, which fails its start
// loudly.
func allocatePorts(keys []string, want map[string]int, fixed map[string]bool) (map[string]int, error) {
	var lis []net.Listener
	defer func() {
		for _, l := range lis {
			_ = l.Close()
		}
	}()
	out := make(map[string]int, len(keys))
	var rest []string
	for _, k := range keys {
		p := want[k]
		if p == 0 {
			rest = append(rest, k)
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			if fixed[k] {
				return nil, portInUse(k, p, err)
			}
			rest = append(rest, k)
			continue
		}
		lis = append(lis, l)
		out[k] = p
	}
	for _, k := range rest {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve a loopback port for %s: %w", k, err)
		}
		lis = append(lis, l)
		out[k] = l.Addr().(*net.TCPAddr).Port
	}
	return out, nil
}

func portInUse(key string, port int, err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s port 127.0.0.1:%d: %w", key, port, err)
	}
	holder := ""
	if pid, cmd, ok := portOwner(port); ok {
		holder = fmt.Sprintf(" by process %d (%s)", pid, cmd)
	}
	return fmt.Errorf("%s port 127.0.0.1:%d is in use%s: %w", key, port, holder, ErrPortInUse)
}

// portOwner finds the process listening on a TCP port through /proc: the socket's
// inode in /proc/net/tcp{,6}, then the process with a descriptor on it. It only
// sees processes the caller may inspect; ok is false when it found none.
func portOwner(port int) (pid int, cmdline string, ok bool) {
	inodes := map[string]bool{}
	hexPort := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			// local_address, ..., st (0A = LISTEN), ..., inode is field 9.
			if len(fields) > 9 && strings.HasSuffix(fields[1], hexPort) && fields[3] == "0A" {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0, "", false
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		id, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name()))
			if err == nil && inodes[target] {
				cmd, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
				return id, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")), true
			}
		}
	}
	return 0, "", false
}
