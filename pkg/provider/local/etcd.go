package local

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

// An etcd snapshot file, as SnapshotEtcd (`kubeplug etcd snapshot`) writes it and
// `kubeplug up --restore-from` reads it, is three parts:
//
//	kubeplug-etcd-snapshot v1\n      the format line
//	{...SnapshotHeader as JSON...}\n  one line
//	etcd's snapshot                   Size bytes, SHA256 their digest, as etcd's
//	                                  Maintenance.Snapshot streams it (its own
//	                                  sha256 trailer included)
//
// The header names the cluster (its name and its CA's fingerprint), so that a
// snapshot of another cluster is refused, and carries the cluster's identity
// (clusterpki.IdentityFiles: the CAs and the service-account keys), so that
// a restore after `down --purge` brings back a cluster whose kubeconfigs,
// kube-root-ca.crt ConfigMaps and service-account tokens are still valid. The
// file holds every Secret of the cluster and its CA keys: it is written
// readable by its owner only.
const snapshotMagic = "kubeplug-etcd-snapshot v1"

// maxSnapshotHeader bounds the header line.
const maxSnapshotHeader = 1 << 20

// restoreRevisionBump is how far a restore moves etcd's revision forward, and
// marks the old ones compacted (etcdutl's advice for Kubernetes): a client
// that watched the cluster before relists instead of waiting for revisions
// it already saw.
const restoreRevisionBump = 1_000_000_000

// SnapshotHeader describes an etcd snapshot file.
type SnapshotHeader struct {
	// Cluster is the name of the cluster the snapshot was taken of.
	Cluster string `json:"cluster"`
	// CAFingerprint is "sha256:" and the hex SHA-256 of the cluster CA's DER.
	CAFingerprint string `json:"caFingerprint"`
	// KubernetesVersion is the cluster's version when the snapshot was taken.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// EtcdVersion is the version of the etcd that served the snapshot.
	EtcdVersion string    `json:"etcdVersion,omitempty"`
	Taken       time.Time `json:"taken"`
	// Revision and Keys are etcd's revision and key count in the snapshot.
	Revision int64 `json:"revision"`
	Keys     int   `json:"keys"`
	// Size and SHA256 are those of etcd's snapshot, the part after the
	// header.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Identity holds clusterpki.IdentityFiles by name.
	Identity map[string][]byte `json:"identity"`
}

var _ provider.EtcdSnapshotter = (*Provider)(nil)

// pkiDir is where the cluster's certificates are on this host, in both
// control-plane modes.
func (p *Provider) pkiDir() string {
	return underRoot(p.machineRoot(ControlPlaneNode), factPKIDir)
}

// etcdEndpoint is the client URL of the running cluster's etcd: the
// control-plane machine's, or the host processes'.
func (p *Provider) etcdEndpoint(ctx context.Context) (string, error) {
	st, err := readState(p.opts.StateDir)
	if err != nil {
		return "", err
	}
	if st == nil {
		return "", fmt.Errorf("cluster %s has no state in %s: %w", p.opts.ClusterName, p.opts.StateDir, provider.ErrNotRunning)
	}
	running, err := Running(ctx, p.opts.StateDir)
	if err != nil {
		return "", err
	}
	if !running {
		return "", fmt.Errorf("cluster %s (state directory %s): %w; `kubeplug up` starts it", p.opts.ClusterName, p.opts.StateDir, provider.ErrNotRunning)
	}
	if st.controlPlaneMachine() && st.Network != nil {
		var endpoints []string
		for _, ns := range st.Nodes {
			if ns.Role == model.RoleControlPlane && ns.Machine {
				endpoints = append(endpoints, "http://"+net.JoinHostPort(st.Network.NodeIP(ns.RealIndex).String(), strconv.Itoa(machineEtcdClientPort)))
			}
		}
		if len(endpoints) == 1 {
			return endpoints[0], nil
		}
		// Several members: a snapshot comes from one that answers, with
		// quorum (a lost member's copy could be old).
		members, err := etcdMembers(ctx, endpoints)
		if err != nil {
			return "", fmt.Errorf("cluster %s: %w", p.opts.ClusterName, err)
		}
		for _, m := range members {
			if m.Healthy {
				return m.ClientURL, nil
			}
		}
	}
	u, err := controlplane.EtcdURL(filepath.Join(p.opts.StateDir, controlPlaneDir))
	if err != nil {
		return "", fmt.Errorf("cluster %s: %w", p.opts.ClusterName, err)
	}
	return u, nil
}

// SnapshotEtcd implements provider.EtcdSnapshotter: a snapshot of the running
// cluster's etcd through etcd's Maintenance API, a point-in-time copy of every
// object, the plugins' release records included. etcd's own checksum is
// verified before file is written.
func (p *Provider) SnapshotEtcd(ctx context.Context, file string) (*provider.EtcdSnapshot, error) {
	began := time.Now()
	endpoint, err := p.etcdEndpoint(ctx)
	if err != nil {
		return nil, err
	}
	h := SnapshotHeader{Cluster: p.opts.ClusterName, Taken: time.Now().UTC()}
	if h.CAFingerprint, err = caFingerprint(p.pkiDir()); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", p.opts.ClusterName, err)
	}
	if h.Identity, err = readIdentity(p.pkiDir()); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", p.opts.ClusterName, err)
	}
	if st, err := readState(p.opts.StateDir); err == nil && st != nil {
		h.KubernetesVersion = st.KubernetesVersion
	}
	dir := filepath.Dir(file)
	tmp, err := os.CreateTemp(dir, ".etcd-snapshot-*")
	if err != nil {
		return nil, fmt.Errorf("write snapshot %s: %w", file, err)
	}
	db := tmp.Name()
	_ = tmp.Close()
	defer func() { _ = os.Remove(db) }()
	cfg := clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()}
	if h.EtcdVersion, err = snapshotSave(ctx, cfg, db); err != nil {
		return nil, fmt.Errorf("snapshot etcd of cluster %s at %s: %w", p.opts.ClusterName, endpoint, err)
	}
	if h.Size, h.SHA256, err = verifyEtcdChecksum(db); err != nil {
		return nil, fmt.Errorf("snapshot etcd of cluster %s: %w", p.opts.ClusterName, err)
	}
	status, err := snapshot.NewV3(zap.NewNop()).Status(db)
	if err != nil {
		return nil, fmt.Errorf("snapshot etcd of cluster %s: read the snapshot: %w", p.opts.ClusterName, err)
	}
	h.Revision, h.Keys = status.Revision, status.TotalKey
	if err := writeSnapshotFile(file, &h, db); err != nil {
		return nil, err
	}
	p.event("etcd", "", fmt.Sprintf("snapshot of cluster %s written to %s (revision %d, %d keys, %d bytes)", h.Cluster, file, h.Revision, h.Keys, h.Size))
	return &provider.EtcdSnapshot{File: file, Cluster: h.Cluster, CAFingerprint: h.CAFingerprint, KubernetesVersion: h.KubernetesVersion,
		EtcdVersion: h.EtcdVersion, Taken: h.Taken, Revision: h.Revision, Keys: h.Keys, Size: h.Size, SHA256: h.SHA256, Duration: time.Since(began)}, nil
}

// snapshotSave streams etcd's snapshot to path; it is a variable for tests.
var snapshotSave = func(ctx context.Context, cfg clientv3.Config, path string) (string, error) {
	return snapshot.NewV3(zap.NewNop()).Save(ctx, cfg, path)
}

// verifyEtcdChecksum checks the sha256 trailer etcd appends to a snapshot and
// returns the file's size and its own sha256.
func verifyEtcdChecksum(path string) (int64, string, error) {
	f, err := os.Open(path) //nolint:gosec // our own temporary file
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return 0, "", err
	}
	n := fi.Size()
	if n%512 != sha256.Size {
		return 0, "", fmt.Errorf("etcd's snapshot (%d bytes) has no sha256 trailer", n)
	}
	body, whole := sha256.New(), sha256.New()
	if _, err := io.CopyN(io.MultiWriter(body, whole), f, n-sha256.Size); err != nil {
		return 0, "", err
	}
	trailer := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, trailer); err != nil {
		return 0, "", err
	}
	whole.Write(trailer)
	if !bytes.Equal(body.Sum(nil), trailer) {
		return 0, "", errors.New("etcd's snapshot does not match its own sha256 trailer")
	}
	return n, hex.EncodeToString(whole.Sum(nil)), nil
}

// writeSnapshotFile writes the format line, h and the etcd snapshot at db to
// file, through a temporary file renamed into place, readable by its owner
// only.
func writeSnapshotFile(file string, h *SnapshotHeader, db string) error {
	hb, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("write snapshot %s: %w", file, err)
	}
	in, err := os.Open(db) //nolint:gosec // our own temporary file
	if err != nil {
		return fmt.Errorf("write snapshot %s: %w", file, err)
	}
	defer func() { _ = in.Close() }()
	tmp := file + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600) //nolint:gosec // the user's output file
	if err != nil {
		return fmt.Errorf("write snapshot %s: %w", file, err)
	}
	w := bufio.NewWriter(out)
	_, _ = w.WriteString(snapshotMagic + "\n")
	_, _ = w.Write(hb)
	_ = w.WriteByte('\n')
	_, err = io.Copy(w, in)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write snapshot %s: %w", file, err)
	}
	return nil
}

// ReadSnapshot reads and verifies the snapshot file: its format line, its
// header, and etcd's snapshot after it (its size and sha256 as the header
// says). With db set, etcd's snapshot is written there. A file that is not
// a snapshot, is truncated or corrupt is an error naming it and what is
// wrong.
func ReadSnapshot(file, db string) (*SnapshotHeader, error) {
	f, err := os.Open(file) //nolint:gosec // the user's snapshot file
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", file, err)
	}
	defer func() { _ = f.Close() }()
	r := bufio.NewReader(f)
	h, err := readSnapshotHeader(r, file)
	if err != nil {
		return nil, err
	}
	if err := copySnapshotData(r, h, file, db); err != nil {
		return nil, err
	}
	return h, nil
}

// readSnapshotHeader reads the format line and the header, and checks the
// header is whole and its CA is the one it names.
func readSnapshotHeader(r *bufio.Reader, file string) (*SnapshotHeader, error) {
	magic, err := r.ReadString('\n')
	if err != nil || strings.TrimSuffix(magic, "\n") != snapshotMagic {
		return nil, fmt.Errorf("snapshot %s: not a kubeplug etcd snapshot (its first line is not %q): write one with `kubeplug etcd snapshot`", file, snapshotMagic)
	}
	line, err := readLine(r, maxSnapshotHeader)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: truncated or corrupt header: %w", file, err)
	}
	var h SnapshotHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return nil, fmt.Errorf("snapshot %s: corrupt header: %w", file, err)
	}
	if h.Cluster == "" || h.CAFingerprint == "" || h.Size <= 0 || len(h.SHA256) != 2*sha256.Size {
		return nil, fmt.Errorf("snapshot %s: incomplete header (cluster %q, CA %q, size %d, sha256 %q)", file, h.Cluster, h.CAFingerprint, h.Size, h.SHA256)
	}
	for _, name := range clusterpki.IdentityFiles {
		if len(h.Identity[name]) == 0 {
			return nil, fmt.Errorf("snapshot %s: the header has no %s of the cluster's identity", file, name)
		}
	}
	if got, err := fingerprintPEM(h.Identity["ca.crt"]); err != nil || got != h.CAFingerprint {
		return nil, fmt.Errorf("snapshot %s: the CA in its header (%s) is not the one it names (%s)", file, got, h.CAFingerprint)
	}
	return &h, nil
}

// copySnapshotData reads etcd's snapshot after the header, checking its size
// and sha256 against the header's, into db (when set).
func copySnapshotData(r *bufio.Reader, h *SnapshotHeader, file, db string) error {
	w := io.Discard
	if db != "" {
		out, err := os.OpenFile(db, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600) //nolint:gosec // the caller's temporary file
		if err != nil {
			return err
		}
		defer func() { _ = out.Close() }()
		w = out
	}
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, sum), io.LimitReader(r, h.Size+1))
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", file, err)
	}
	switch {
	case n < h.Size:
		return fmt.Errorf("snapshot %s is truncated: it holds %d bytes of etcd data, its header says %d", file, n, h.Size)
	case n > h.Size:
		return fmt.Errorf("snapshot %s: more etcd data than the %d bytes its header says", file, h.Size)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != h.SHA256 {
		return fmt.Errorf("snapshot %s is corrupt: its etcd data has sha256 %s, its header says %s", file, got, h.SHA256)
	}
	return nil
}

// readLine reads one line of at most limit bytes, without its newline.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > limit {
			return nil, fmt.Errorf("longer than %d bytes", limit)
		}
		if err == nil {
			return bytes.TrimSuffix(out, []byte("\n")), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// caFingerprint is the fingerprint of the CA certificate in pkiDir.
func caFingerprint(pkiDir string) (string, error) {
	b, err := os.ReadFile(clusterpki.CACertPath(pkiDir))
	if err != nil {
		return "", fmt.Errorf("read the cluster's CA: %w", err)
	}
	return fingerprintPEM(b)
}

// fingerprintPEM is "sha256:" and the hex SHA-256 of a PEM certificate's DER.
func fingerprintPEM(b []byte) (string, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return "", errors.New("the CA certificate is not PEM")
	}
	if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
		return "", fmt.Errorf("the CA certificate: %w", err)
	}
	sum := sha256.Sum256(blk.Bytes)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// readIdentity reads clusterpki.IdentityFiles from pkiDir.
func readIdentity(pkiDir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, name := range clusterpki.IdentityFiles {
		b, err := os.ReadFile(filepath.Join(pkiDir, name)) //nolint:gosec // the cluster's pki directory
		if err != nil {
			return nil, fmt.Errorf("read the cluster's identity: %w", err)
		}
		out[name] = b
	}
	return out, nil
}

// restoreCheck refuses, before Up changes anything, a restore from
// p.opts.RestoreFrom that cannot be done: a file that is not a whole
// snapshot, one of another cluster (name or CA), of a newer Kubernetes than
// version, or a restore onto a cluster that exists in the state directory
// unless p.opts.RestoreForce. It returns the verified header; db holds etcd's
// snapshot.
func (p *Provider) restoreCheck(ctx context.Context, st *state, version, db string) (*SnapshotHeader, error) {
	file := p.opts.RestoreFrom
	h, err := ReadSnapshot(file, db)
	if err != nil {
		return nil, err
	}
	if h.Cluster != p.opts.ClusterName {
		return nil, fmt.Errorf("snapshot %s is of cluster %q, not %q (metadata.name): restore a snapshot of this cluster", file, h.Cluster, p.opts.ClusterName)
	}
	if h.KubernetesVersion != "" {
		a, errA := semver.NewVersion(h.KubernetesVersion)
		b, errB := semver.NewVersion(strings.TrimPrefix(version, "v"))
		if errA == nil && errB == nil && b.LessThan(a) {
			return nil, fmt.Errorf("snapshot %s was taken on Kubernetes %s, spec.kubernetesVersion is %s: restoring onto an older Kubernetes is not supported", file, h.KubernetesVersion, version)
		}
	}
	if fp, err := caFingerprint(p.pkiDir()); err == nil && fp != h.CAFingerprint {
		return nil, fmt.Errorf("snapshot %s is of another cluster named %q: its CA is %s, the CA in %s is %s; restore it after `kubeplug down --purge` (which deletes this cluster's state) or into another --state-dir",
			file, h.Cluster, h.CAFingerprint, p.opts.StateDir, fp)
	}
	if st != nil && len(st.Nodes) > 0 && !p.opts.RestoreForce {
		running, _ := Running(ctx, p.opts.StateDir)
		how := "exists (stopped)"
		if running {
			how = "is running"
		}
		return nil, fmt.Errorf("cluster %s %s in %s: restoring %s would replace its etcd data; run `kubeplug down --purge` first, or pass --force (its control plane is stopped, its etcd data kept aside)",
			p.opts.ClusterName, how, p.opts.StateDir, file)
	}
	return h, nil
}

// restoreEtcd makes etcd's data directory from the verified snapshot db
// (etcdutl's restore: a new member of a new one-member cluster, its revision
// bumped) for the etcd whose command line is etcdArgs, with its data in
// dataDir on this host, and puts the cluster's identity from h into the PKI
// directory. A cluster that runs is stopped first (only with --force does Up
// get here with one), and existing data is moved aside, never deleted.
// restoreControlPlane makes etcd's data directory from the snapshot in db
// before the control plane starts: the host's, the control-plane machine's
// (in its writable layer), or with several control-plane machines each
// member's, all from the same snapshot with the cluster's whole membership,
// as etcd's disaster recovery restores every member of a cluster.
func (p *Provider) restoreControlPlane(ctx context.Context, h *SnapshotHeader, db string, etcdArgs []string) error {
	dataDir := flagValue(etcdArgs, "data-dir")
	if dataDir == "" {
		return errors.New("restore etcd: the rendered etcd static Pod has no --data-dir")
	}
	if !p.cpMachine() {
		return p.restoreEtcd(ctx, h, db, etcdArgs, dataDir)
	}
	// etcd's data is in the machine's writable layer.
	rel, err := filepath.Rel(p.machineRoot(ControlPlaneNode), dataDir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("restore etcd: the rendered etcd's --data-dir %s is not on the control-plane machine", dataDir)
	}
	upper := func(node string) string { return filepath.Join(p.machineDir(node), machineNodeDir, "upper", rel) }
	if p.haCount < 2 {
		return p.restoreEtcd(ctx, h, db, etcdArgs, upper(ControlPlaneNode))
	}
	members := haMembers(*p.cpNet, p.haCount)
	for _, m := range members {
		args := slices.Clone(etcdArgs)
		for _, f := range haEtcdFlags(m, p.cpNet.ID, initialCluster(members), "new") {
			args = setFlag(args, f[0], f[1])
		}
		if err := p.restoreEtcd(ctx, h, db, args, upper(cpName(m.Index))); err != nil {
			return err
		}
	}
	return nil
}

func (p *Provider) restoreEtcd(ctx context.Context, h *SnapshotHeader, db string, etcdArgs []string, dataDir string) error {
	began := time.Now()
	if running, _ := Running(ctx, p.opts.StateDir); running {
		if err := p.stopForRestore(ctx); err != nil {
			return err
		}
	}
	if entries, err := os.ReadDir(dataDir); err == nil && len(entries) > 0 {
		aside := fmt.Sprintf("%s.before-restore-%s", dataDir, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(dataDir, aside); err != nil {
			return fmt.Errorf("move etcd's data %s aside: %w", dataDir, err)
		}
		p.event("etcd", "", "etcd's data of the cluster before the restore is kept in "+aside)
	}
	if err := writeIdentity(p.pkiDir(), h.Identity); err != nil {
		return err
	}
	name := flagValue(etcdArgs, "name")
	if name == "" {
		name = "default"
	}
	peer := flagValue(etcdArgs, "initial-advertise-peer-urls")
	if peer == "" {
		peer = flagValue(etcdArgs, "listen-peer-urls")
	}
	if peer == "" {
		peer = "http://localhost:2380"
	}
	peer, _, _ = strings.Cut(peer, ",")
	initial := flagValue(etcdArgs, "initial-cluster")
	if initial == "" {
		initial = name + "=" + peer
	}
	token := flagValue(etcdArgs, "initial-cluster-token")
	if token == "" {
		token = "etcd-cluster"
	}
	if err := os.MkdirAll(filepath.Dir(dataDir), 0o755); err != nil {
		return err
	}
	err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath:        db,
		Name:                name,
		OutputDataDir:       dataDir,
		PeerURLs:            []string{peer},
		InitialCluster:      initial,
		InitialClusterToken: token,
		RevisionBump:        restoreRevisionBump,
		MarkCompacted:       true,
	})
	if err != nil {
		return fmt.Errorf("restore etcd of cluster %s from %s into %s: %w", p.opts.ClusterName, p.opts.RestoreFrom, dataDir, err)
	}
	p.event("etcd", "", fmt.Sprintf("restored etcd from %s (taken %s, revision %d, %d keys) in %s",
		p.opts.RestoreFrom, h.Taken.Format(time.RFC3339), h.Revision, h.Keys, time.Since(began).Round(time.Millisecond)))
	return nil
}

// stopForRestore stops the running control plane: the host's processes, or
// the control-plane machine.
func (p *Provider) stopForRestore(ctx context.Context) error {
	st, err := readState(p.opts.StateDir)
	if err != nil {
		return err
	}
	p.event("etcd", "", "stopping the control plane of cluster "+p.opts.ClusterName+" to restore its etcd (--force)")
	if st.controlPlaneMachine() && st.Network != nil {
		for _, ns := range st.Nodes {
			if ns.Name == ControlPlaneNode {
				m := p.recordedMachine(ns, *st.Network)
				if err := m.Stop(ctx, 10*time.Second); err != nil {
					return fmt.Errorf("stop machine %s to restore etcd: %w", ns.Name, err)
				}
			}
		}
		return nil
	}
	if err := controlplane.StopDetached(ctx, p.cpOptions()); err != nil && !errors.Is(err, controlplane.ErrNotRunning) {
		return fmt.Errorf("stop the control plane to restore etcd: %w", err)
	}
	return nil
}

// writeIdentity writes the cluster's identity files into pkiDir, keys
// readable by their owner only.
func writeIdentity(pkiDir string, files map[string][]byte) error {
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return err
	}
	for _, name := range clusterpki.IdentityFiles {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".key") {
			mode = 0o600
		}
		if err := os.WriteFile(filepath.Join(pkiDir, name), files[name], mode); err != nil {
			return fmt.Errorf("restore the cluster's identity: %w", err)
		}
	}
	return nil
}
