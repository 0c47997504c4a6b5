package hookspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kubeplug/kubeplug/internal/bounded"
)

// Paths on a machine, relative to the node agent's root: the renderer writes them,
// the agent reads them.
const (
	// HooksManifestPath is the agent's input: every hook of the machine.
	HooksManifestPath = "/etc/kubeplug/hooks.json"
	// HooksDir holds hook scripts as HooksDir/<plugin>/<hook>.
	HooksDir = "/var/lib/kubeplug/hooks"
)

// FailedMarkerPath is written when the boot stopped or failed the node: it holds
// why, one line per failure. Its existence keeps the kubelet from starting (the
// rendered kubelet drop-in has ConditionPathExists=!FailedMarkerPath), whoever
// starts it. The agent's boot removes it when it starts again.
const FailedMarkerPath = "/var/lib/kubeplug/node-failed"

// AfterDeployTriggerPath is the file whose appearance runs the afterDeploy phase on a
// real machine: the rendered kubeplug-after-deploy.path unit watches it and starts
// kubeplug-after-deploy.service, which runs `kubeplug node run --phase afterDeploy`.
// Whatever finishes the deploy (the provider, an SSM command, a DaemonSet with the
// host's /var/lib/kubeplug) writes to it, e.g. `date > /var/lib/kubeplug/after-deploy`;
// each write runs the phase again, where hooks that succeeded are skipped.
const AfterDeployTriggerPath = "/var/lib/kubeplug/after-deploy"

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
	nameRE   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$`)
	sha256RE = regexp.MustCompile(`^[a-f0-9]{64}$`)
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
	// URL is a script downloaded when the hook runs: https://host/path or
	// s3://bucket/key. SHA256 is its hex digest, required with URL: a script whose
	// digest differs is not run.
	URL    string `json:"url,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Before names hooks of the phase that start only after this one ends; Requires
	// names hooks that must succeed (now or in an earlier run) before this one runs.
	// A name is "plugin/hook", or a bare hook name of the same plugin.
	Before   []string `json:"before,omitempty"`
	Requires []string `json:"requires,omitempty"`
	// Once means that after one success the hook never runs again on the machine, even
	// when its definition changes, and even when the agent is told to force a re-run.
	Once bool `json:"once,omitempty"`
}

// ID is plugin/name, unique on a machine.
func (h *Hook) ID() string { return h.Plugin + "/" + h.Name }

// Sync says whether the agent waits for the hook before starting the next one.
func (h *Hook) Sync() bool { return strings.HasPrefix(h.Behavior, "sync-") }

// Enforce says whether the hook's failure fails the node.
func (h *Hook) Enforce() bool { return strings.HasSuffix(h.Behavior, "-enforce") }

// Ref resolves a name in Before or Requires to a hook ID: a bare name is a hook of
// the same plugin.
func (h *Hook) Ref(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return h.Plugin + "/" + name
}

// CheckRef checks a name in a hook's before or requires: "plugin/hook" or "hook".
func CheckRef(ref string) error {
	p, n, qualified := strings.Cut(ref, "/")
	if !qualified {
		p, n = "plugin", p
	}
	if !nameRE.MatchString(p) || !nameRE.MatchString(n) {
		return fmt.Errorf("expected a hook name or plugin/hook of lower-case letters, digits, '.', '_' or '-', found %q", ref)
	}
	return nil
}

// CheckURL checks a url hook's source: an https:// or s3:// URL with a host (the
// bucket) and, for s3, a key. Plain http is refused: the digest protects the
// content, but a node should not tell the network which scripts it runs.
func CheckURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return fmt.Errorf("expected an https:// or s3:// URL: %w", err)
	case u.Scheme != "https" && u.Scheme != "s3":
		return fmt.Errorf("expected an https:// or s3:// URL, found scheme %q in %q", u.Scheme, rawURL)
	case u.Host == "":
		return fmt.Errorf("expected a host (for s3, the bucket) in %q", rawURL)
	case u.Scheme == "s3" && strings.Trim(u.Path, "/") == "":
		return fmt.Errorf("expected s3://bucket/key, found %q", rawURL)
	}
	return nil
}

// CheckSHA256 checks the digest a url hook pins its script with: required, 64
// lower-case hex digits.
func CheckSHA256(sha string) error {
	switch {
	case sha == "":
		return fmt.Errorf("a url needs sha256, the hex digest of the script it serves")
	case !sha256RE.MatchString(sha):
		return fmt.Errorf("expected sha256 as 64 lower-case hex digits, found %q", sha)
	}
	return nil
}

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

// MaxManifestSize bounds the hooks manifest a node agent reads.
const MaxManifestSize = 16 << 20

// ReadManifest loads and checks file, filling in each hook's default behaviour; a
// missing file is an empty manifest, because a machine without hooks still runs
// every phase. An error is a *ManifestError.
func ReadManifest(file string) (*Manifest, error) {
	// Bounded by bytes read and, for a FIFO, in time: the agent must never hang
	// on its own configuration.
	b, err := bounded.ReadFile(file, MaxManifestSize)
	if errors.Is(err, os.ErrNotExist) {
		return &Manifest{}, nil
	}
	if err != nil {
		return nil, &ManifestError{Path: file, Err: err}
	}
	return ParseManifest(file, b)
}

// ParseManifest checks data, the hooks manifest read from file (named in
// errors), filling in each hook's default behaviour, as [ReadManifest] does. An
// error is a *ManifestError.
//
// Branches: one check per rule of a hook entry (names, phase, source, URL and
// digest, references, behaviour, timeout, duplicates), each naming the hook;
// together they read as the manifest's rules.
func ParseManifest(file string, data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
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
		case len(h.Command) == 0 && h.Script == "" && h.URL == "":
			return nil, bad("command", "a hook needs a command, a script or a url")
		case h.URL != "" && (len(h.Command) > 0 || h.Script != ""):
			return nil, bad("url", "a url hook has no command or script")
		case h.Script != "" && h.Script != path.Join(HooksDir, h.Plugin, h.Name):
			return nil, bad("script", "expected %s, found %q", path.Join(HooksDir, h.Plugin, h.Name), h.Script)
		}
		if h.URL != "" {
			if err := CheckURL(h.URL); err != nil {
				return nil, bad("url", "%w", err)
			}
			if err := CheckSHA256(h.SHA256); err != nil {
				return nil, bad("sha256", "%w", err)
			}
		}
		for _, list := range []struct {
			field string
			refs  []string
		}{{"before", h.Before}, {"requires", h.Requires}} {
			for j, r := range list.refs {
				if err := CheckRef(r); err != nil {
					return nil, bad(fmt.Sprintf("%s[%d]", list.field, j), "%w", err)
				}
			}
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

// TimeoutOrDefault is the hook's timeout, DefaultTimeout when it has none (or, in a
// manifest ReadManifest did not check, an invalid one).
func (h *Hook) TimeoutOrDefault() time.Duration {
	if d, err := time.ParseDuration(h.Timeout); err == nil && d > 0 {
		return d
	}
	return DefaultTimeout
}
