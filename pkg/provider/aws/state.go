package aws

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// stateVersion is the version of the state file this kubeplug writes.
const stateVersion = 1

// State is what a Deployer created and what the stacks output, kept in its state
// file (Options.StateFile) as JSON. It is written after every step, so an
// interrupted run leaves a record of everything it created.
type State struct {
	Version int    `json:"version"`
	Region  string `json:"region"`
	Bucket  string `json:"bucket"`
	// BucketCreated is true when this cluster created the bucket; Destroy then
	// deletes it once empty.
	BucketCreated bool `json:"bucketCreated,omitempty"`
	// Objects are the keys this cluster uploaded (it found the others there),
	// sorted.
	Objects []string `json:"objects,omitempty"`
	// Assets map each rendered file's path to its s3:// URI.
	Assets map[string]string `json:"assets,omitempty"`
	// Stacks in deployment order.
	Stacks []StackState `json:"stacks,omitempty"`
}

// StackState is one stack as the last run left it.
type StackState struct {
	// Name is the stack's short name ("core", "<plugin>-<name>").
	Name string `json:"name"`
	// StackName and StackID are CloudFormation's.
	StackName string `json:"stackName"`
	StackID   string `json:"stackID,omitempty"`
	// Status is the stack's status after the last run, as CloudFormation says it
	// (CREATE_COMPLETE, UPDATE_ROLLBACK_COMPLETE, ...).
	Status string `json:"status,omitempty"`
	// ChangeSet is the change set of the last run.
	ChangeSet string `json:"changeSet,omitempty"`
	// Outputs are the stack's outputs by key.
	Outputs map[string]string `json:"outputs,omitempty"`
	// Reason says why the last run failed, empty when it did not.
	Reason string `json:"reason,omitempty"`
}

// ReadState reads a state file; a missing file is an empty State.
func ReadState(file string) (*State, error) {
	b, err := os.ReadFile(file) //nolint:gosec // the provider's own state file
	if errors.Is(err, fs.ErrNotExist) {
		return &State{Version: stateVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the aws state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("read the aws state %s: %w", file, err)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("read the aws state %s: version %d, this kubeplug reads %d", file, s.Version, stateVersion)
	}
	return &s, nil
}

// write replaces the state file atomically.
func (s *State) write(file string) error {
	slices.Sort(s.Objects)
	s.Objects = slices.Compact(s.Objects)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the aws state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("write the aws state: %w", err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write the aws state: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("write the aws state: %w", err)
	}
	return nil
}

// stack returns the recorded stack of a short name, adding it when missing.
func (s *State) stack(name, stackName string) *StackState {
	for i := range s.Stacks {
		if s.Stacks[i].Name == name {
			return &s.Stacks[i]
		}
	}
	s.Stacks = append(s.Stacks, StackState{Name: name, StackName: stackName})
	return &s.Stacks[len(s.Stacks)-1]
}

// Outputs returns every stack's outputs, by short stack name.
func (s *State) Outputs() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, st := range s.Stacks {
		if st.Outputs != nil {
			out[st.Name] = st.Outputs
		}
	}
	return out
}

// removeState removes the state file once nothing is left to record.
func removeState(file string) error {
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the aws state: %w", err)
	}
	return nil
}
