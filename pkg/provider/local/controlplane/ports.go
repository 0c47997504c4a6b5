package controlplane

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/kubeplug/kubeplug/internal/portblock"
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
// (Options.APIServerPort, a detached cluster's recorded ports while free, else
// ports of the data directory's port block). The block stays reserved for
// opts.DataDir in this process, its ports held, until Start hands each to its
// component (or the process ends), so no other process takes them between.
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
	var blk *portblock.Block
	if opts.DataDir != "" {
		dir, err := filepath.Abs(opts.DataDir)
		if err != nil {
			return Ports{}, err
		}
		blk = acquireBlock(opts.Logger, dir, st)
	}
	return choosePorts(st, opts.APIServerPort, nil, blk)
}

// portsNeeded is how many ports a control plane binds: every component's and
// etcd's peer port.
var portsNeeded = len(startOrder) + 1

// acquireBlock reserves the port block of the control plane in dataDir: the one
// its recorded ports lie in when it can, else another. A cluster whose recorded
// processes run keeps its block. Without a free block (a kernel whose
// ephemeral range covers every port, a system without flock), the ports are
// chosen by the kernel, as before blocks, with a warning.
func acquireBlock(log *slog.Logger, dataDir string, st *stateFile) *portblock.Block {
	var prefer []int
	if st != nil {
		prefer = append(prefer, st.Ports[string(APIServer)], st.Ports[string(Etcd)])
	}
	blk, err := portblock.Acquire(dataDir, prefer, portsNeeded, func(owner string) bool {
		running, _ := Running(owner)
		return running
	})
	if err != nil {
		if log != nil {
			log.Warn("no block of loopback ports could be reserved; taking ports the kernel chooses, which another process may take before a component binds one", "err", err)
		}
		return nil
	}
	return blk
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
// free, else ports of blk (free ports the kernel chooses when blk is nil).
func choosePorts(st *stateFile, apiServerPort int, fixed *Ports, blk *portblock.Block) (Ports, error) {
	want, must := map[string]int{}, map[string]bool{}
	if st != nil {
		maps.Copy(want, st.Ports)
		// A recorded port outside the block reserved now may lie in another
		// cluster's: the block's own are taken instead (but for the API
		// server's, which the cluster's kubeconfigs name).
		for k, p := range want {
			if blk != nil && !blk.Contains(p) && k != string(APIServer) {
				delete(want, k)
			}
		}
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
	got, err := allocatePorts(keys, want, must, blk, nil)
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
// port if it is free (or one blk holds for this process); if it is not, a key
// in fixed fails with an error wrapping ErrPortInUse that names the port and,
// when /proc tells, the process holding it, and any other key falls back to a
// free port. Free ports are blk's, lowest first, or without blk ones the
// kernel chooses. All ports are held together while choosing, so they are
// distinct; blk's ports stay held until Block.Hand. A kernel-chosen port could
// be taken by another process before the component binds it, which fails its
// start loudly. Ports in avoid (other components') are never given.
func allocatePorts(keys []string, want map[string]int, fixed map[string]bool, blk *portblock.Block, avoid map[int]bool) (map[string]int, error) {
	var lis []net.Listener
	defer func() {
		for _, l := range lis {
			_ = l.Close()
		}
	}()
	out := make(map[string]int, len(keys))
	used := maps.Clone(avoid)
	if used == nil {
		used = map[int]bool{}
	}
	var spare []int
	if blk != nil {
		spare = blk.Ports()
	}
	var rest []string
	for _, k := range keys {
		p := want[k]
		if p == 0 {
			rest = append(rest, k)
			continue
		}
		if slices.Contains(spare, p) && !used[p] {
			out[k], used[p] = p, true
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
		out[k], used[p] = p, true
	}
	for _, k := range rest {
		if i := slices.IndexFunc(spare, func(p int) bool { return !used[p] }); i >= 0 {
			out[k], used[spare[i]] = spare[i], true
			continue
		}
		if blk != nil {
			return nil, fmt.Errorf("reserve a loopback port for %s: every port of the block %d–%d is in use", k, blk.Base, blk.Base+portblock.Size-1)
		}
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
