package local

import (
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// machineDir is machines/<node> in the state dir; its root/ is the node's "/".
func (p *Provider) machineDir(node string) string {
	return filepath.Join(p.opts.StateDir, machinesDir, node)
}

func (p *Provider) machineRoot(node string) string {
	return filepath.Join(p.machineDir(node), "root")
}

// underRoot maps a clean absolute machine path under root. Clean removes any
// "..", so the result cannot leave root.
func underRoot(root, machinePath string) string {
	return filepath.Join(root, filepath.FromSlash(path.Clean("/"+machinePath)))
}

// writeMachine lays m's files and unit files down under the node's root (files
// already holding the content keep their modification time), then removes the
// files an earlier writeMachine wrote that m no longer has. Owners are not
// applied: the local machine is the user's directory.
func (p *Provider) writeMachine(node string, m *render.Machine) error {
	root := p.machineRoot(node)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("node %s: create machine root: %w", node, err)
	}
	var files []render.MachineFile
	if m != nil {
		files = append(slices.Clone(m.Files), m.UnitFiles()...)
	}
	written := make([]string, 0, len(files))
	for _, f := range files {
		dst := underRoot(root, f.Path)
		if err := writeFile(dst, f.Content, f.Mode.Perm()); err != nil {
			return fmt.Errorf("node %s: write %s: %w", node, f.Path, err)
		}
		written = append(written, f.Path)
	}
	slices.Sort(written)
	listPath := filepath.Join(p.machineDir(node), filesList)
	var old []string
	if b, err := os.ReadFile(listPath); err == nil { //nolint:gosec // inside the state dir
		_ = json.Unmarshal(b, &old)
	}
	for _, f := range old {
		if _, still := slices.BinarySearch(written, f); !still {
			if err := os.Remove(underRoot(root, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("node %s: remove %s, no longer rendered: %w", node, f, err)
			}
		}
	}
	return writeJSONAtomic(listPath, written)
}

func writeFile(dst string, content []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if cur, err := os.ReadFile(dst); err == nil && bytes.Equal(cur, content) { //nolint:gosec // inside the state dir
		return os.Chmod(dst, mode)
	}
	tmp := dst + ".kubeplug-tmp"
	if err := os.WriteFile(tmp, content, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil { // WriteFile's mode is masked by the umask
		return err
	}
	return os.Rename(tmp, dst)
}

// runPhase runs one node agent phase on the node's root and summarises it. An
// enforced hook failure is an error wrapping provider.ErrHookFailed that names
// the node, the hook, its plugin and phase, and the tail of its stderr; a
// bypassed failure is only reported, as an event.
func (p *Provider) runPhase(ctx context.Context, d *desiredNode, phase string) (provider.HookSummary, error) {
	var sum provider.HookSummary
	root := p.machineRoot(d.name)
	if _, err := os.Stat(underRoot(root, hookspec.HooksManifestPath)); errors.Is(err, fs.ErrNotExist) {
		return sum, nil // a machine without a render (no hooks manifest): nothing to run
	}
	// A simulated node's hooks run on this machine: in a sandbox where
	// nothing but the node's root is writable, so a hook meant for a cloud
	// machine (apt-get, writing /etc) cannot change the user's own.
	if !nodeagent.SandboxAvailable() {
		return sum, fmt.Errorf("node %s: %s: the hooks of a simulated node run in a sandbox (a mount and pid namespace where only the node's root is writable), which needs root and util-linux's unshare and mount", d.name, phase)
	}
	agent, err := nodeagent.New(nodeagent.Options{
		Sandbox: nodeagent.SandboxArgv(root),
		Root:    root,
		Logger:  p.log.With("node", d.name),
		Cluster: hookspec.Cluster{Name: p.opts.ClusterName},
		Node:    hookspec.Node{Name: d.name, Pool: d.pool, Role: d.role, Labels: d.labels},
	})
	if err != nil {
		return sum, fmt.Errorf("node %s: %s: %w", d.name, phase, err)
	}
	rep, runErr := agent.Run(ctx, phase)
	return p.summarize(ctx, d, phase, rep, runErr)
}

// summarize turns a phase's report into its summary and an error for an
// enforced failure (see runPhase).
func (p *Provider) summarize(ctx context.Context, d *desiredNode, phase string, rep *nodeagent.Report, runErr error) (provider.HookSummary, error) {
	var sum provider.HookSummary
	var failures []string
	if rep != nil {
		for _, h := range rep.Hooks {
			switch {
			case h.Status == nodeagent.StatusSucceeded:
				sum.Succeeded++
			case h.Status == nodeagent.StatusSkipped:
				sum.Skipped++
			case h.Status == nodeagent.StatusNotRun:
				sum.NotRun++
			case h.Status.Failed():
				sum.Failed++
				msg := fmt.Sprintf("hook %s/%s (%s) %s: %s", h.Plugin, h.Name, phase, h.Status, h.Reason)
				if t := stderrTail(h.Stderr); t != "" {
					msg += ": " + t
				}
				sum.Failures = append(sum.Failures, h.Plugin+"/"+h.Name+": "+h.Reason)
				if enforced(h.Behavior) {
					failures = append(failures, msg)
				} else {
					p.event("hooks", d.name, msg+" (bypassed)")
				}
			}
		}
		if n := len(rep.Hooks); n > 0 {
			p.event("hooks", d.name, fmt.Sprintf("%s: %d hooks: %d ran, %d skipped, %d failed", phase, n, sum.Succeeded, sum.Skipped, sum.Failed))
		}
	}
	switch {
	case ctx.Err() != nil:
		// Interrupted: the hooks it stopped are not the node's failure.
		return sum, fmt.Errorf("node %s: %s interrupted: %w", d.name, phase, context.Cause(ctx))
	case len(failures) > 0:
		return sum, hookFailed("node " + d.name + ": " + strings.Join(failures, "; "))
	case runErr != nil:
		return sum, fmt.Errorf("node %s: %s: %w", d.name, phase, runErr)
	}
	return sum, nil
}

func enforced(behavior string) bool {
	if behavior == "" {
		behavior = hookspec.DefaultBehavior
	}
	return strings.HasSuffix(behavior, "-enforce")
}

// stderrTail is the last line or so of a hook's stderr, for the error message.
func stderrTail(s string) string {
	s = strings.TrimSpace(s)
	const max = 300
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return strings.ReplaceAll(s, "\n", " | ")
}

// desiredNode is one node Up brings to its pool's state.
type desiredNode struct {
	name, pool, role string
	labels           map[string]string // the Node's labels (pool labels + kubeplug.dev/pool)
	machine          *render.Machine
	spec             *model.Pool
	real             *realnode.Node // nil: simulated
	// sys is the node's systemd machine when its pool is a machine pool
	// (then real is its Node); nil otherwise.
	sys *realnode.Machine
	// keyPairs are the plugins' key pairs the node's machine gets.
	keyPairs []model.KeyPair
}

// hookFailed is an enforced hook failure: its message names node, hook, plugin
// and phase, and it matches provider.ErrHookFailed.
type hookFailed string

func (e hookFailed) Error() string { return string(e) }

// Is makes errors.Is(err, provider.ErrHookFailed) true.
func (e hookFailed) Is(target error) bool { return target == provider.ErrHookFailed }
