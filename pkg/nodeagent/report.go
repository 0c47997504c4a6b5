package nodeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/hookspec"
)

// Status is what became of a hook in a run.
type Status string

const (
	// StatusSucceeded means the hook ran and exited 0.
	StatusSucceeded Status = "succeeded"
	// StatusFailed means the hook exited non-zero, could not start, or its condition could
	// not be compiled or evaluated.
	StatusFailed Status = "failed"
	// StatusTimedOut means the hook ran past its timeout and its process group was killed.
	StatusTimedOut Status = "timed-out"
	// StatusCanceled means the run was canceled while the hook ran; its group was killed.
	StatusCanceled Status = "canceled"
	// StatusSkipped means the condition was false, or the hook succeeded in an earlier
	// run (a once hook: in any earlier run).
	StatusSkipped Status = "skipped"
	// StatusNotRun means an enforced failure or a cancel stopped the run before the hook,
	// or a hook it requires did not succeed.
	StatusNotRun Status = "not-run"
)

// Failed says whether the status counts as the hook's failure.
func (s Status) Failed() bool {
	return s == StatusFailed || s == StatusTimedOut || s == StatusCanceled
}

// phrase completes "which ..." in the reason of a hook that required one with s.
func (s Status) phrase() string {
	switch s {
	case StatusSucceeded, StatusFailed:
		return string(s)
	case StatusTimedOut:
		return "timed out"
	case StatusCanceled:
		return "was canceled"
	case StatusSkipped:
		return "was skipped"
	}
	return "did not run"
}

// Duration is a time.Duration written as a Go duration string in JSON.
type Duration time.Duration

// MarshalJSON writes d like "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// HookResult is one hook's outcome.
type HookResult struct {
	Plugin   string `json:"plugin"`
	Name     string `json:"name"`
	Behavior string `json:"behavior"`
	Status   Status `json:"status"`
	// Reason says why a hook was skipped, failed or not run.
	Reason string `json:"reason,omitempty"`
	// Warning is about the hook's definition, for example a condition comparing
	// versions as strings, or says which processes a sync hook left behind (the
	// agent ended them).
	Warning string `json:"warning,omitempty"`
	// ExitCode is the process's exit status; -1 when it did not exit by itself.
	ExitCode  *int      `json:"exitCode,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	Duration  Duration  `json:"duration"`
	// Stdout and Stderr are the last bytes the hook wrote (Options.OutputTail).
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
}

// Report is what a run did, also written to ReportsDir/<phase>.json.
type Report struct {
	Phase      string    `json:"phase"`
	Node       string    `json:"node"`
	Root       string    `json:"root"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	// Hooks are the phase's hooks in the order they were considered: the manifest's,
	// as rearranged by requires and before.
	Hooks []HookResult `json:"hooks"`
	// Failed is true when an enforced hook failed, so the node has failed.
	Failed bool `json:"failed"`
	// Error is Run's error, if any.
	Error string `json:"error,omitempty"`
}

// writeFileAtomic replaces file with b so that a reader or a crash sees the old or
// the new content, never a part.
func writeFileAtomic(file string, b []byte) error {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(file)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil { //nolint:gosec // reports and state hold no secrets and are read by operators
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Rename(f.Name(), file); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}

func writeJSON(file string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", file, err)
	}
	return writeFileAtomic(file, append(b, '\n'))
}

// state records, per phase, the hooks that succeeded and the digest of what they ran,
// so that a re-run skips them until their definition changes.
type state struct {
	mu        sync.Mutex
	file      string
	Succeeded map[string]stateEntry `json:"succeeded"`
}

type stateEntry struct {
	Digest string    `json:"digest"`
	At     time.Time `json:"at"`
}

// readState loads file; a missing or unreadable state only means hooks run again.
func readState(file string) (*state, error) {
	s := &state{file: file, Succeeded: map[string]stateEntry{}}
	b, err := bounded.ReadFile(file, hookspec.MaxManifestSize)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", file, err)
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("read state %s: expected JSON: %w", file, err)
	}
	if s.Succeeded == nil {
		s.Succeeded = map[string]stateEntry{}
	}
	return s, nil
}

// succeeded says whether the hook succeeded in an earlier run, whatever it ran then.
func (s *state) succeeded(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.Succeeded[id]
	return ok
}

func (s *state) done(id, digest string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.Succeeded[id]
	return ok && e.Digest == digest
}

// record saves a success at once, so that a boot interrupted later keeps it.
func (s *state) record(id, digest string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Succeeded[id] = stateEntry{Digest: digest, At: at.UTC()}
	return writeJSON(s.file, s)
}

// forget drops a hook that failed, so that the state says only what is true now.
func (s *state) forget(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.Succeeded[id]; !ok {
		return nil
	}
	delete(s.Succeeded, id)
	return writeJSON(s.file, s)
}
