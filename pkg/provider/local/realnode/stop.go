package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Stop stops everything of the node and removes what it made outside Dir:
// processes (by cgroup, so containers, shims and whatever they forked go too),
// mounts below Dir and the run directory, cgroups, the namespace and the veth.
// It works from the names alone: a node that is half up, or not up at all, is
// fine.
func (n *Node) Stop(ctx context.Context) error {
	var errs []error
	// The kubelet first, so it does not restart the containers being killed.
	for _, comp := range []string{"kubelet", "kube-proxy"} {
		if pid := n.pid(comp); pid > 0 && n.alive(comp) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	if err := n.killCgroup(ctx); err != nil {
		errs = append(errs, err)
	}
	for _, comp := range components {
		_ = os.Remove(n.path(comp + ".pid"))
	}
	if err := unmountBelow(n.Dir, n.runDir()); err != nil {
		errs = append(errs, err)
	}
	if err := n.removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	if _, err := os.Stat(n.netns()); err == nil {
		if _, err := run(ctx, "ip", "netns", "del", n.nsName()); err != nil {
			errs = append(errs, err)
		}
	}
	if ip := n.Network.NodeIP(n.Index); ip != nil {
		_, _ = run(ctx, "ip", "route", "flush", "via", ip.String()) // the host's route to its Pods
	}
	if _, err := run(ctx, "ip", "link", "show", n.veth()); err == nil {
		// Removing the namespace removes the veth pair too, asynchronously.
		if _, err := run(ctx, "ip", "link", "del", n.veth()); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(n.runDir()); err != nil {
		errs = append(errs, err)
	}
	// /run/kubeplug/<ID> goes when its last node goes.
	_ = os.Remove(filepath.Dir(n.runDir()))
	_ = os.Remove(filepath.Dir(filepath.Dir(n.runDir())))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("node %s: stop: %w", n.Name, err)
	}
	return nil
}

// killCgroup SIGKILLs every process in the node's cgroups until none is left.
func (n *Node) killCgroup(ctx context.Context) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids := n.cgroupPids()
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of node %s survive SIGKILL", pids, n.Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cgroupPids lists the processes in the node's cgroup tree of the pids
// hierarchy (every process of a v1 machine is in one cgroup of each).
func (n *Node) cgroupPids() []int {
	var pids []int
	root := filepath.Join("/sys/fs/cgroup/pids", n.CgroupParent())
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for f := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeCgroups removes the node's cgroups, deepest first, in every hierarchy,
// and the cluster's parent cgroups when they are empty.
func (n *Node) removeCgroups() error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	// runc also makes the containers' cgroups in the unified (v2) hierarchy of
	// a hybrid machine.
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil {
		hs = append(hs, "/sys/fs/cgroup/unified")
	}
	var errs []error
	for _, h := range hs {
		root := filepath.Join(h, n.CgroupParent())
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
		_ = syscall.Rmdir(filepath.Dir(root))               // /kubeplug/<ID>
		_ = syscall.Rmdir(filepath.Dir(filepath.Dir(root))) // /kubeplug
	}
	return errors.Join(errs...)
}

// unmountBelow unmounts every mount point at or below one of dirs, deepest
// first (lazily when busy).
func unmountBelow(dirs ...string) error {
	points, err := mountPoints()
	if err != nil {
		return err
	}
	var mine []string
	for _, p := range points {
		for _, d := range dirs {
			if p == d || strings.HasPrefix(p, d+"/") {
				mine = append(mine, p)
			}
		}
	}
	slices.SortFunc(mine, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, p := range mine {
		if err := syscall.Unmount(p, 0); err != nil {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// MountsBelow lists the mount points at or below dir (for tests and checks).
func MountsBelow(dir string) ([]string, error) {
	points, err := mountPoints()
	var out []string
	for _, p := range points {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out, err
}

func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
