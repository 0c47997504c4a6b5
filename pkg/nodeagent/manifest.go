package nodeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Paths on a machine, relative to the agent's root. They match pkg/render's, which
// writes them.
const (
	// HooksManifestPath is the agent's input: every hook of the machine.
	HooksManifestPath = "/etc/kubeplug/hooks.json"
	// HooksDir holds hook scripts as HooksDir/<plugin>/<hook>.
	HooksDir = "/var/lib/kubeplug/hooks"
	// ReportsDir holds one report per phase, <phase>.json, rewritten by every run.
	ReportsDir = "/var/lib/kubeplug/reports"
	// StateDir holds one file per phase recording the hooks that succeeded.
	StateDir = "/var/lib/kubeplug/state"
)

// Entry points, in boot order; afterDeploy is triggered by the deploy, not the boot.
const (
	PhaseBeforeNodeup = "beforeNodeup"
	PhaseAfterNodeup  = "afterNodeup"
	PhaseAfterDeploy  = "afterDeploy"
)

// Phases are the entry points a hook may run at.
var Phases = []string{PhaseBeforeNodeup, PhaseAfterNodeup, PhaseAfterDeploy}

// Behaviours: sync hooks are waited for before the next hook starts, async ones run
// alongside the hooks after them; enforce failures fail the node, bypass ones are
// only reported.
const (
	BehaviorSyncEnforce  = "sync-enforce"
	BehaviorSyncBypass   = "sync-bypass"
	BehaviorAsyncEnforce = "async-enforce"
	BehaviorAsyncBypass  = "async-bypass"
)

// Defaults for a hook that leaves them out.
const (
	DefaultBehavior = BehaviorSyncEnforce
	DefaultTimeout  = 5 * time.Minute
)

var (
	behaviors = []string{BehaviorSyncEnforce, BehaviorSyncBypass, BehaviorAsyncEnforce, BehaviorAsyncBypass}
	// nameRE keeps plugin and hook names usable as path elements.
	nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$`)
)

// Manifest is the content of HooksManifestPath.
type Manifest struct {
	// Cluster and Node, when present, are the defaults of the facts conditions see;
	// the agent's options override them field by field.
	Cluster *Cluster `json:"cluster,omitempty"`
	Node    *Node    `json:"node,omitempty"`
	// Hooks in the order they run within a phase.
	Hooks []Hook `json:"hooks"`
}

// Hook is one entry of the manifest.
type Hook struct {
	Plugin string `json:"plugin"`
	Name   string `json:"name"`
	// At is the phase the hook runs in.
	At string `json:"at"`
	// Command is the argv to run. For a script hook it is the script's path, or empty.
	Command []string `json:"command,omitempty"`
	// Script is the machine path of the hook's script, HooksDir/<plugin>/<name>.
	Script   string `json:"script,omitempty"`
	Behavior string `json:"behavior,omitempty"`
	// Timeout is a Go duration; empty means DefaultTimeout.
	Timeout string `json:"timeout,omitempty"`
	// When is a CEL condition; empty means always.
	When string `json:"when,omitempty"`
}

// ID is plugin/name, unique on a machine.
func (h *Hook) ID() string { return h.Plugin + "/" + h.Name }

// sync says whether the agent waits for the hook before starting the next one.
func (h *Hook) sync() bool { return strings.HasPrefix(h.Behavior, "sync-") }

// enforce says whether the hook's failure fails the node.
func (h *Hook) enforce() bool { return strings.HasSuffix(h.Behavior, "-enforce") }

// ManifestError is a manifest that cannot be run; nothing was run.
type ManifestError struct {
	// Path of the manifest file.
	Path string
	// Field is a path into the manifest like hooks[2].timeout; empty for the file.
	Field string
	Err   error
}

func (e *ManifestError) Error() string {
	if e.Field == "" {
		return e.Path + ": " + e.Err.Error()
	}
	return e.Path + ": " + e.Field + ": " + e.Err.Error()
}

func (e *ManifestError) Unwrap() error { return e.Err }

// readManifest loads and checks file; a missing file is an empty manifest, because a
// machine without hooks still runs every phase.
func readManifest(file string) (*Manifest, error) {
	b, err := os.ReadFile(file) //nolint:gosec // the manifest's path is the agent's configuration
	if errors.Is(err, os.ErrNotExist) {
		return &Manifest{}, nil
	}
	if err != nil {
		return nil, &ManifestError{Path: file, Err: err}
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, &ManifestError{Path: file, Err: fmt.Errorf("expected the hooks manifest as JSON: %w", err)}
	}
	seen := map[string]int{}
	for i := range m.Hooks {
		h := &m.Hooks[i]
		field := func(f string) string { return fmt.Sprintf("hooks[%d].%s", i, f) }
		bad := func(f, format string, args ...any) error {
			return &ManifestError{Path: file, Field: field(f), Err: fmt.Errorf(format, args...)}
		}
		switch {
		case !nameRE.MatchString(h.Plugin):
			return nil, bad("plugin", "expected a plugin name of lower-case letters, digits, '.', '_' or '-', found %q", h.Plugin)
		case !nameRE.MatchString(h.Name):
			return nil, bad("name", "expected a hook name of lower-case letters, digits, '.', '_' or '-', found %q", h.Name)
		case !slices.Contains(Phases, h.At):
			return nil, bad("at", "expected one of %s, found %q", strings.Join(Phases, ", "), h.At)
		case len(h.Command) == 0 && h.Script == "":
			return nil, bad("command", "a hook needs a command or a script")
		case h.Script != "" && h.Script != path.Join(HooksDir, h.Plugin, h.Name):
			return nil, bad("script", "expected %s, found %q", path.Join(HooksDir, h.Plugin, h.Name), h.Script)
		}
		if h.Behavior == "" {
			h.Behavior = DefaultBehavior
		}
		if !slices.Contains(behaviors, h.Behavior) {
			return nil, bad("behavior", "expected one of %s, found %q", strings.Join(behaviors, ", "), h.Behavior)
		}
		if h.Timeout != "" {
			if d, err := time.ParseDuration(h.Timeout); err != nil || d <= 0 {
				return nil, bad("timeout", "expected a positive Go duration like 90s or 5m, found %q", h.Timeout)
			}
		}
		if j, ok := seen[h.ID()]; ok {
			return nil, bad("name", "hook %s is also hooks[%d]", h.ID(), j)
		}
		seen[h.ID()] = i
	}
	return &m, nil
}

// timeout is the hook's checked timeout.
func (h *Hook) timeout() time.Duration {
	if d, err := time.ParseDuration(h.Timeout); err == nil && d > 0 {
		return d
	}
	return DefaultTimeout
}
