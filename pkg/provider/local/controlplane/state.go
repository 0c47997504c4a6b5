package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// StateVersion is the version of DataDir/state.json this package writes and
// reads. It changes whenever a detached control plane written by an older
// kubeplug could not be attached to or restarted correctly.
const StateVersion = 2

// StateFile is the name of the record of a detached control plane in DataDir.
const StateFile = "state.json"

// stateFile is what a detached control plane records: enough to reconnect to it
// from another process, stop it, and start it again on the same ports.
type stateFile struct {
	Version     int            `json:"version"`
	BinDir      string         `json:"binDir"`
	ContextName string         `json:"contextName"`
	Ports       map[string]int `json:"ports"`
	// Components holds the running processes; empty once stopped.
	Components map[Component]componentState `json:"components,omitempty"`
	// Args are the command lines, kept after Stop too.
	Args map[Component][]string `json:"args,omitempty"`
	// PKIDir and ComponentKubeconfig are Options' (PKIDir with its default).
	PKIDir              string `json:"pkiDir"`
	ComponentKubeconfig string `json:"componentKubeconfig,omitempty"`
}

type componentState struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime,omitempty"`
}

// readState reads DataDir/state.json; it returns nil, nil when there is none.
func readState(dataDir string) (*stateFile, error) {
	path := filepath.Join(dataDir, StateFile)
	b, err := os.ReadFile(path) //nolint:gosec // the data directory is the caller's
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read control plane state: %w", err)
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read control plane state %s: %w: %w", path, ErrIncompatibleState, err)
	}
	if st.Version != StateVersion {
		return nil, fmt.Errorf("control plane state %s has version %d, this kubeplug reads version %d: %w",
			path, st.Version, StateVersion, ErrIncompatibleState)
	}
	return &st, nil
}

// writeState replaces DataDir/state.json atomically, so a reader never sees half
// of it, even when the writer is interrupted.
func writeState(dataDir string, st *stateFile) error {
	st.Version = StateVersion
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode control plane state: %w", err)
	}
	path := filepath.Join(dataDir, StateFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write control plane state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write control plane state: %w", err)
	}
	return nil
}

// alive returns the recorded processes that still run.
func (st *stateFile) alive() map[Component]*process {
	out := map[Component]*process{}
	for comp, cs := range st.Components {
		if processAlive(cs.PID, cs.StartTime) {
			out[comp] = &process{pidv: cs.PID, startTime: cs.StartTime}
		}
	}
	return out
}

// Running reports whether DataDir holds a detached control plane with at least
// one recorded process still alive. The error wraps ErrIncompatibleState for a
// state file this package cannot read.
func Running(dataDir string) (bool, error) {
	st, err := readState(dataDir)
	if err != nil || st == nil {
		return false, err
	}
	return len(st.alive()) > 0, nil
}

// saveState records the running processes of a detached control plane. The
// caller holds c.mu.
func (c *ControlPlane) saveStateLocked() error {
	if !c.opts.Detach || !c.owned {
		return nil
	}
	st := &stateFile{
		BinDir:      c.binDir,
		ContextName: c.opts.ContextName,
		Ports:       map[string]int{etcdPeer: c.etcdPeerPort},
		Components:  map[Component]componentState{},
		Args:        c.args,

		PKIDir:              c.pki.dir,
		ComponentKubeconfig: c.opts.ComponentKubeconfig,
	}
	for comp, port := range c.ports {
		st.Ports[string(comp)] = port
	}
	for comp, p := range c.procs {
		st.Components[comp] = componentState{PID: p.pid(), StartTime: p.startTime}
	}
	return writeState(c.dataDir, st)
}

// Attach reconnects to the detached control plane recorded in opts.DataDir,
// started by Start with Detach in this or another process. It checks that every
// recorded component still runs (same pid and start time) and that the API
// server is ready, within opts.StartTimeout. Of opts it uses DataDir (required),
// Logger, StopGracePeriod and StartTimeout; the command lines, PKIDir and
// ComponentKubeconfig are the recorded ones.
//
// The error wraps ErrNotRunning when no recorded process runs, ErrDegraded when
// some do but not all or the API server is not ready (StopDetached ends the
// rest), and ErrIncompatibleState for a state file this package cannot read.
// Stop on the returned ControlPlane stops the processes and keeps DataDir.
func Attach(ctx context.Context, opts Options) (*ControlPlane, error) {
	if opts.DataDir == "" {
		return nil, errors.New("attach to control plane: no data directory")
	}
	opts.Detach = true
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("resolve data directory %q: %w", opts.DataDir, err)
	}
	st, err := readState(dataDir)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("attach to control plane in %s: no %s: %w", dataDir, StateFile, ErrNotRunning)
	}
	procs := st.alive()
	if len(procs) == 0 {
		return nil, fmt.Errorf("attach to control plane in %s: %w", dataDir, ErrNotRunning)
	}
	if st.ContextName != "" {
		opts.ContextName = st.ContextName
	}
	opts.PKIDir, opts.ComponentKubeconfig = st.PKIDir, st.ComponentKubeconfig
	c := &ControlPlane{
		opts:    opts,
		log:     opts.Logger,
		binDir:  st.BinDir,
		dataDir: dataDir,
		pki:     pki{dir: st.PKIDir},
		procs:   procs,
		nodeSeq: map[string]int{},
		args:    st.Args,
		ports:   map[Component]int{},
		owned:   true,
	}
	for _, comp := range startOrder {
		c.ports[comp] = st.Ports[string(comp)]
	}
	c.etcdPeerPort = st.Ports[etcdPeer]
	var dead []string
	for _, comp := range startOrder {
		if procs[comp] == nil {
			dead = append(dead, fmt.Sprintf("%s (log %s)", comp, c.LogPath(comp)))
		}
	}
	if len(dead) > 0 {
		return nil, fmt.Errorf("attach to control plane in %s: not running: %s: %w", dataDir, strings.Join(dead, ", "), ErrDegraded)
	}
	if err := c.writeKubeconfig(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, min(opts.StartTimeout, 30*time.Second))
	defer cancel()
	if err := c.waitReady(ctx, APIServer); err != nil {
		return nil, fmt.Errorf("attach to control plane in %s: %w: %w", dataDir, ErrDegraded, err)
	}
	c.log.Info("attached to control plane", "datadir", dataDir, "host", c.Host())
	return c, nil
}

// StopDetached stops whatever still runs of the detached control plane recorded
// in opts.DataDir (for example after Attach failed with ErrDegraded), in reverse
// start order, and records that nothing runs. It returns an error wrapping
// ErrNotRunning when nothing ran. It never removes DataDir.
func StopDetached(ctx context.Context, opts Options) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	st, err := readState(opts.DataDir)
	if err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("stop control plane in %s: no %s: %w", opts.DataDir, StateFile, ErrNotRunning)
	}
	procs := st.alive()
	var errs []error
	for i := len(startOrder) - 1; i >= 0; i-- {
		if p := procs[startOrder[i]]; p != nil {
			if err := p.stop(ctx, opts.StopGracePeriod); err != nil {
				errs = append(errs, fmt.Errorf("stop %s: %w", startOrder[i], err))
			}
		}
	}
	if len(errs) == 0 {
		st.Components = nil
		errs = append(errs, writeState(opts.DataDir, st))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(procs) == 0 {
		return fmt.Errorf("stop control plane in %s: %w", opts.DataDir, ErrNotRunning)
	}
	opts.Logger.Info("control plane stopped", "datadir", opts.DataDir)
	return nil
}

// EtcdURL is the client URL of the etcd of the detached control plane
// recorded in dataDir, while it runs. The error wraps ErrNotRunning when
// nothing of it runs.
func EtcdURL(dataDir string) (string, error) {
	st, err := readState(dataDir)
	if err != nil {
		return "", err
	}
	if st == nil || st.alive()[Etcd] == nil || st.Ports[string(Etcd)] == 0 {
		return "", fmt.Errorf("etcd of the control plane in %s: %w", dataDir, ErrNotRunning)
	}
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(st.Ports[string(Etcd)])), nil
}
