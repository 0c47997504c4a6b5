package controlplane

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// portKey names a port in state.json: a component's main port, or etcd's peer port.
const etcdPeer = "etcd-peer"

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
