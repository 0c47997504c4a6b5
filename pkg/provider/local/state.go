package local

import (
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

// StateVersion is the version of the state dir's layout and of StateFile. A
// state dir of another version is refused with provider.ErrIncompatibleState.
const StateVersion = 2

// Names inside the state dir.
const (
	// StateFile records the provider's nodes; its presence marks a state dir.
	StateFile = "provider.json"
	// controlPlaneDir is the control plane's data directory.
	controlPlaneDir = "controlplane"
	// machinesDir holds machines/<node>/root and machines/<node>/files.json.
	machinesDir = "machines"
	// lockFile is held while Up, AfterDeploy or Down works on the state dir.
	lockFile = ".lock"
	// filesList records the files written under a node's root, so that files a
	// later render no longer has are removed.
	filesList = "files.json"
)

// state is StateFile.
type state struct {
	Version     int         `json:"version"`
	ClusterName string      `json:"clusterName"`
	Nodes       []nodeState `json:"nodes,omitempty"`
	// Network is the real nodes' network, once a real node was started; Down
	// removes it.
	Network *realnode.Network `json:"network,omitempty"`
	// KubernetesVersion is the version the cluster was created with (absent in
	// state dirs of earlier kubeplug versions); Up refuses another one.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// LoadBalancer is the machine in front of the API servers of a control
	// plane of several machines (ha.go); Down removes it.
	LoadBalancer *nodeState `json:"loadBalancer,omitempty"`
}

type nodeState struct {
	Name string `json:"name"`
	Pool string `json:"pool"`
	Role string `json:"role"`
	// Joined is whether the node joined in the last Up; AfterDeploy runs on
	// joined nodes only.
	Joined bool `json:"joined,omitempty"`
	// Real nodes run a kubelet on this machine; RealIndex is the node's
	// ordinal in the node network (its address and Pod subnet).
	Real      bool `json:"real,omitempty"`
	RealIndex int  `json:"realIndex,omitempty"`
	// Machine nodes are real nodes that are systemd machines (machine pools).
	Machine bool `json:"machine,omitempty"`
}

// Kubeconfig is the path of the cluster-admin kubeconfig in stateDir, valid
// while the cluster runs.
func Kubeconfig(stateDir string) string {
	return filepath.Join(stateDir, controlPlaneDir, "kubeconfig")
}

// Running reports whether the cluster of stateDir runs (any of its control
// plane's processes is alive). The error wraps provider.ErrIncompatibleState for
// a state dir this version cannot read.
func Running(ctx context.Context, stateDir string) (bool, error) {
	st, err := readState(stateDir)
	if err != nil {
		return false, err
	}
	ok, err := controlplane.Running(filepath.Join(stateDir, controlPlaneDir))
	if err != nil {
		return false, incompatible(stateDir, err)
	}
	if !ok && st != nil && st.controlPlaneMachine() && st.Network != nil {
		// Any control-plane machine that runs: with several, the others
		// may be lost.
		for _, ns := range st.Nodes {
			if ns.Role != model.RoleControlPlane || !ns.Machine {
				continue
			}
			m := &realnode.Machine{Node: &realnode.Node{Name: ns.Name, Index: ns.RealIndex,
				Dir: filepath.Join(stateDir, machinesDir, ns.Name, machineNodeDir), Network: *st.Network}}
			if m.Running(ctx) {
				return true, nil
			}
		}
		return false, nil
	}
	return ok, nil
}

// controlPlaneMachine says whether the state records a control plane on a
// machine.
func (st *state) controlPlaneMachine() bool {
	return st != nil && slices.ContainsFunc(st.Nodes, func(ns nodeState) bool { return ns.Name == ControlPlaneNode && ns.Machine })
}

func incompatible(stateDir string, err error) error {
	if errors.Is(err, controlplane.ErrIncompatibleState) {
		return fmt.Errorf("state directory %s: %w (%w); run `kubeplug down --purge` to remove it, then `kubeplug up` again",
			stateDir, provider.ErrIncompatibleState, err)
	}
	return err
}

// readState returns StateFile's content, nil when there is none.
func readState(stateDir string) (*state, error) {
	path := filepath.Join(stateDir, StateFile)
	b, err := os.ReadFile(path) //nolint:gosec // the state dir is the user's
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil || st.Version != StateVersion {
		found := fmt.Sprintf("version %d", st.Version)
		if err != nil {
			found = "unreadable: " + err.Error()
		}
		return nil, fmt.Errorf("state directory %s: %s is %s, this kubeplug reads version %d: %w; run `kubeplug down --purge` to remove it, then `kubeplug up` again",
			stateDir, StateFile, found, StateVersion, provider.ErrIncompatibleState)
	}
	return &st, nil
}

func writeState(stateDir string, st *state) error {
	st.Version = StateVersion
	return writeJSONAtomic(filepath.Join(stateDir, StateFile), st)
}

func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
