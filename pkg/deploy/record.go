package deploy

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/metadata"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
)

// Phases of a release record.
const (
	PhaseApplying = "Applying"
	PhaseReady    = "Ready"
	PhaseFailed   = "Failed"
	// PhaseSuperseded and PhaseInterrupted are never stored: History reports a Ready
	// revision that a later one replaced as Superseded, and an Applying one that is
	// not the newest (its run died) as Interrupted.
	PhaseSuperseded  = "Superseded"
	PhaseInterrupted = "Interrupted"
)

// Release records are Secrets of this type in Options.Namespace. A revision is one
// head Secret, kubeplug.PLUGIN.vN, holding the gzipped JSON Record (small: object
// references, digests, status), and one or more chunk Secrets holding the gzipped
// JSON of the objects the revision applied, split in ChunkSize pieces so that a
// release of any size stays below the API server's object limit.
const (
	RecordType = corev1.SecretType("kubeplug.dev/release.v1")
	// LabelOwner is "kubeplug" on every record Secret.
	LabelOwner = "owner"
	// LabelRevision is the revision a record Secret belongs to.
	LabelRevision = "kubeplug.dev/revision"
	// LabelPart is "head" or "chunk".
	LabelPart = "kubeplug.dev/part"
	// LabelStatus is the head's phase, for kubectl get secrets -L.
	LabelStatus = "kubeplug.dev/status"
	recordKey   = "release"
	chunkKey    = "chunk"
)

// ChunkSize is the most compressed object data one chunk Secret holds.
var ChunkSize = 512 << 10

// legacyInventoryKey and LabelInventory are the ConfigMap inventories kubeplug kept
// before release records; they are read as revision 1 and replaced.
const (
	legacyInventoryKey = "inventory.json.gz"
	LabelInventory     = "kubeplug.dev/inventory"
)

// Record is one revision of a plugin's release: what kubeplug applied, from which
// package and values, with what result. The newest revision is the plugin's
// inventory: while an apply runs its Objects are old ∪ new, so that a run killed at
// any point leaves a record covering everything the plugin may own.
type Record struct {
	Plugin   string `json:"plugin"`
	Revision int    `json:"revision"`
	Version  string `json:"version"`
	// PackageDigest is the digest of the plugin package the revision came from.
	PackageDigest string `json:"packageDigest,omitempty"`
	// ValuesDigest identifies the values; the values themselves are never stored.
	ValuesDigest string `json:"valuesDigest,omitempty"`
	// ContentDigest identifies the desired objects and Helm charts and values: equal
	// content is no new revision.
	ContentDigest string `json:"contentDigest,omitempty"`
	// AllowDowngrade is what this version's plugin.yaml declared
	// (spec.upgrade.allowDowngrade): moving from it to an older version is safe.
	AllowDowngrade bool     `json:"allowDowngrade,omitempty"`
	Requires       []string `json:"requires,omitempty"`
	// Objects are every object the plugin owns, its Helm releases' included.
	Objects []ObjRef `json:"objects"`
	// Releases are the plugin's Helm releases; HelmRevisions the revision each was
	// at when this revision was Ready ("namespace/name" → revision).
	Releases      []ReleaseRef   `json:"releases,omitempty"`
	HelmRevisions map[string]int `json:"helmRevisions,omitempty"`
	// Phase is Applying while an apply runs, Ready after one succeeded, Failed after
	// one failed; Message holds the diagnostics of the last run.
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
	// Description says what the revision was: install, upgrade, rollback to 3...
	Description string    `json:"description,omitempty"`
	Started     time.Time `json:"started,omitzero"`
	Finished    time.Time `json:"finished,omitzero"`
	// Chunks name the Secrets holding the applied objects, in order; Manifests is
	// the sha256 of their concatenation and Count the number of objects.
	Chunks    []string `json:"chunks,omitempty"`
	Manifests string   `json:"manifests,omitempty"`
	Count     int      `json:"count,omitempty"`

	// legacy is set on a record read from a ConfigMap inventory.
	legacy bool
}

func (r *Record) refs() []ObjRef {
	if r == nil {
		return nil
	}
	return r.Objects
}

func (r *Record) releases() []ReleaseRef {
	if r == nil {
		return nil
	}
	return r.Releases
}

func (r *Record) clone() *Record {
	c := *r
	c.Requires = slices.Clone(r.Requires)
	c.Objects = slices.Clone(r.Objects)
	c.Releases = slices.Clone(r.Releases)
	c.HelmRevisions = maps.Clone(r.HelmRevisions)
	c.Chunks = slices.Clone(r.Chunks)
	return &c
}

func releaseRefs(rels []HelmRelease) []ReleaseRef {
	out := make([]ReleaseRef, 0, len(rels))
	for _, r := range rels {
		out = append(out, ReleaseRef{Namespace: r.Namespace, Name: r.Name})
	}
	slices.SortFunc(out, func(a, b ReleaseRef) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// unionReleases returns a ∪ b, sorted.
func unionReleases(a, b []ReleaseRef) []ReleaseRef {
	out := slices.Clone(a)
	for _, r := range b {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b ReleaseRef) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func recordName(plugin string, rev int) string { return fmt.Sprintf("kubeplug.%s.v%d", plugin, rev) }

func legacyInventoryName(plugin string) string { return "kubeplug-inventory-" + plugin }

func (d *Deployer) ensureNamespace(ctx context.Context) error {
	return d.retry(ctx, func(ctx context.Context) error {
		_, err := d.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: d.opts.Namespace, Labels: map[string]string{LabelManagedBy: FieldManager},
		}}, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// gz compresses raw.
func gz(raw []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(raw) // a bytes.Buffer does not fail
	_ = zw.Close()
	return buf.Bytes()
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, 1<<30))
}

// heads lists the record heads in the namespace, of one plugin or (plugin "") all.
func (d *Deployer) heads(ctx context.Context, plugin string) ([]*Record, error) {
	sel := LabelOwner + "=kubeplug," + LabelPart + "=head"
	if plugin != "" {
		sel += "," + LabelPlugin + "=" + plugin
	}
	var list *corev1.SecretList
	err := d.retry(ctx, func(ctx context.Context) error {
		var err error
		list, err = d.core.CoreV1().Secrets(d.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		if plugin == "" {
			return nil, fmt.Errorf("list the release records in %s: %w", d.opts.Namespace, err)
		}
		return nil, fmt.Errorf("list the release records of %s: %w", plugin, err)
	}
	out := make([]*Record, 0, len(list.Items))
	for i := range list.Items {
		s := &list.Items[i]
		if s.Type != RecordType {
			continue
		}
		raw, err := gunzip(s.Data[recordKey])
		if err != nil {
			return nil, fmt.Errorf("release record %s/%s is corrupt: %w", s.Namespace, s.Name, err)
		}
		r := &Record{}
		if err := json.Unmarshal(raw, r); err != nil {
			return nil, fmt.Errorf("release record %s/%s is corrupt: %w", s.Namespace, s.Name, err)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Record) int {
		if c := strings.Compare(a.Plugin, b.Plugin); c != 0 {
			return c
		}
		return a.Revision - b.Revision
	})
	return out, nil
}

// history returns a plugin's revisions, oldest first: its release records, or the
// ConfigMap inventory of an older kubeplug as revision 1; none when not installed.
func (d *Deployer) history(ctx context.Context, plugin string) ([]*Record, error) {
	recs, err := d.heads(ctx, plugin)
	if err != nil || len(recs) > 0 {
		return recs, err
	}
	old, err := d.readLegacy(ctx, plugin)
	if err != nil || old == nil {
		return nil, err
	}
	return []*Record{old}, nil
}

// latest is the plugin's newest revision, nil when it is not installed.
func (d *Deployer) latest(ctx context.Context, plugin string) (*Record, []*Record, error) {
	recs, err := d.history(ctx, plugin)
	if err != nil || len(recs) == 0 {
		return nil, nil, err
	}
	return recs[len(recs)-1], recs, nil
}

// readLegacy reads the ConfigMap inventory of an older kubeplug, nil when none.
func (d *Deployer) readLegacy(ctx context.Context, plugin string) (*Record, error) {
	var cm *corev1.ConfigMap
	err := d.retry(ctx, func(ctx context.Context) error {
		var err error
		cm, err = d.core.CoreV1().ConfigMaps(d.opts.Namespace).Get(ctx, legacyInventoryName(plugin), metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the inventory of %s: %w", plugin, err)
	}
	return decodeLegacy(cm)
}

func decodeLegacy(cm *corev1.ConfigMap) (*Record, error) {
	raw, err := gunzip(cm.BinaryData[legacyInventoryKey])
	if err != nil {
		return nil, fmt.Errorf("inventory %s/%s is corrupt: %w", cm.Namespace, cm.Name, err)
	}
	r := &Record{}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("inventory %s/%s is corrupt: %w", cm.Namespace, cm.Name, err)
	}
	r.Revision, r.legacy = 1, true
	r.Started = cm.CreationTimestamp.Time
	r.Description = "migrated from the inventory ConfigMap " + cm.Name + " (objects not recorded: no rollback to it)"
	return r, nil
}

// migrate stores a ConfigMap inventory as revision 1 and deletes the ConfigMap.
func (d *Deployer) migrate(ctx context.Context, r *Record) error {
	r.legacy = false
	if err := d.writeRecord(ctx, r, nil); err != nil {
		return err
	}
	return d.retry(ctx, func(ctx context.Context) error {
		err := d.core.CoreV1().ConfigMaps(d.opts.Namespace).Delete(ctx, legacyInventoryName(r.Plugin), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// writeRecord stores a revision. With objects, it first writes them in new chunk
// Secrets (named by their content, so rewriting a revision never touches chunks a
// head names), then the head that names them, then deletes chunks no head names
// (left by a run killed between the two) and revisions beyond Options.HistoryMax.
// A reader therefore sees a revision whole or not at all. Without objects only the
// head is written, naming the chunks r already has.
func (d *Deployer) writeRecord(ctx context.Context, r *Record, objects []*unstructured.Unstructured) error {
	if objects != nil {
		if err := d.writeChunks(ctx, r, objects); err != nil {
			return err
		}
		faultpoint.Hit("state:chunks-written")
	}
	if err := d.writeHead(ctx, r); err != nil {
		return err
	}
	faultpoint.Hit("state:head-written")
	if objects != nil {
		if err := d.collect(ctx, r.Plugin); err != nil {
			return err
		}
	}
	return nil
}

// writeChunks stores the objects of a revision in chunk Secrets and names them in r.
func (d *Deployer) writeChunks(ctx context.Context, r *Record, objects []*unstructured.Unstructured) error {
	raw, err := json.Marshal(objects)
	if err != nil {
		return fmt.Errorf("encode the objects of %s revision %d: %w", r.Plugin, r.Revision, err)
	}
	payload := gz(raw)
	sum := sha256.Sum256(payload)
	r.Manifests, r.Count, r.Chunks = "sha256:"+hex.EncodeToString(sum[:]), len(objects), nil
	for i := 0; i == 0 || i*ChunkSize < len(payload); i++ {
		part := payload[i*ChunkSize : min((i+1)*ChunkSize, len(payload))]
		name := fmt.Sprintf("%s.%s.%d", recordName(r.Plugin, r.Revision), hex.EncodeToString(sum[:5]), i)
		if err := d.createChunk(ctx, r, name, part); err != nil {
			return err
		}
		r.Chunks = append(r.Chunks, name)
	}
	return nil
}

func (d *Deployer) recordLabels(r *Record, part string) map[string]string {
	return map[string]string{
		LabelOwner: "kubeplug", LabelManagedBy: FieldManager, LabelPlugin: r.Plugin,
		LabelRevision: strconv.Itoa(r.Revision), LabelPart: part,
	}
}

func (d *Deployer) createChunk(ctx context.Context, r *Record, name string, data []byte) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.opts.Namespace, Labels: d.recordLabels(r, "chunk")},
		Type:       RecordType,
		Data:       map[string][]byte{chunkKey: data},
	}
	return d.retry(ctx, func(ctx context.Context) error {
		_, err := d.core.CoreV1().Secrets(d.opts.Namespace).Create(ctx, s, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil // named by its content: the same bytes
		}
		if err != nil {
			return fmt.Errorf("write the release record of %s revision %d (%s): %w", r.Plugin, r.Revision, name, err)
		}
		return nil
	})
}

func (d *Deployer) writeHead(ctx context.Context, r *Record) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode the release record of %s: %w", r.Plugin, err)
	}
	labels := d.recordLabels(r, "head")
	labels[LabelStatus] = r.Phase
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": string(RecordType),
		"metadata": map[string]any{
			"name": recordName(r.Plugin, r.Revision), "namespace": d.opts.Namespace,
			"labels": toAny(labels),
			"annotations": map[string]any{
				"kubeplug.dev/version": r.Version, "kubeplug.dev/objects": strconv.Itoa(len(r.Objects)),
				"kubeplug.dev/description": r.Description,
			},
		},
		"data": map[string]any{recordKey: gz(raw)},
	}}
	return d.retry(ctx, func(ctx context.Context) error {
		_, err := d.dyn.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(d.opts.Namespace).
			Apply(ctx, s.GetName(), s, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			return fmt.Errorf("write the release record of %s revision %d: %w", r.Plugin, r.Revision, err)
		}
		return nil
	})
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// collect deletes a plugin's revisions beyond Options.HistoryMax (heads first) and
// then every chunk no remaining head names.
func (d *Deployer) collect(ctx context.Context, plugin string) error {
	recs, err := d.heads(ctx, plugin)
	if err != nil {
		return err
	}
	if n := len(recs) - d.opts.HistoryMax; n > 0 {
		for _, r := range recs[:n] {
			if err := d.deleteSecret(ctx, recordName(plugin, r.Revision)); err != nil {
				return fmt.Errorf("delete revision %d of %s: %w", r.Revision, plugin, err)
			}
		}
		recs = recs[n:]
	}
	named := map[string]bool{}
	for _, r := range recs {
		for _, c := range r.Chunks {
			named[c] = true
		}
	}
	chunks, err := d.chunkNames(ctx, plugin)
	if err != nil {
		return err
	}
	for _, c := range chunks {
		if named[c] {
			continue
		}
		if err := d.deleteSecret(ctx, c); err != nil {
			return fmt.Errorf("delete the orphaned record chunk %s of %s: %w", c, plugin, err)
		}
	}
	return nil
}

// chunkNames lists a plugin's chunk Secrets by metadata only: chunks are large.
func (d *Deployer) chunkNames(ctx context.Context, plugin string) ([]string, error) {
	mc, err := metadata.NewForConfig(d.cfg)
	if err != nil {
		return nil, err
	}
	var list *metav1.PartialObjectMetadataList
	err = d.retry(ctx, func(ctx context.Context) error {
		var err error
		list, err = mc.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(d.opts.Namespace).
			List(ctx, metav1.ListOptions{LabelSelector: LabelOwner + "=kubeplug," + LabelPart + "=chunk," + LabelPlugin + "=" + plugin})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list the release record chunks of %s: %w", plugin, err)
	}
	out := make([]string, 0, len(list.Items))
	for _, m := range list.Items {
		out = append(out, m.Name)
	}
	return out, nil
}

func (d *Deployer) deleteSecret(ctx context.Context, name string) error {
	return d.retry(ctx, func(ctx context.Context) error {
		err := d.core.CoreV1().Secrets(d.opts.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// ErrNoObjects is returned for a revision whose objects were not recorded (one
// migrated from an older kubeplug's inventory).
var ErrNoObjects = errors.New("the revision's objects were not recorded")

// objects reads the objects a revision applied from its chunks.
func (d *Deployer) objects(ctx context.Context, r *Record) ([]*unstructured.Unstructured, error) {
	if len(r.Chunks) == 0 {
		return nil, fmt.Errorf("plugin %s revision %d: %w", r.Plugin, r.Revision, ErrNoObjects)
	}
	var payload []byte
	for _, name := range r.Chunks {
		var s *corev1.Secret
		err := d.retry(ctx, func(ctx context.Context) error {
			var err error
			s, err = d.core.CoreV1().Secrets(d.opts.Namespace).Get(ctx, name, metav1.GetOptions{})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("read the objects of %s revision %d (%s): %w", r.Plugin, r.Revision, name, err)
		}
		payload = append(payload, s.Data[chunkKey]...)
	}
	sum := sha256.Sum256(payload)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != r.Manifests {
		return nil, fmt.Errorf("the objects of %s revision %d are corrupt: digest %s, recorded %s", r.Plugin, r.Revision, got, r.Manifests)
	}
	raw, err := gunzip(payload)
	if err != nil {
		return nil, fmt.Errorf("the objects of %s revision %d are corrupt: %w", r.Plugin, r.Revision, err)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("the objects of %s revision %d are corrupt: %w", r.Plugin, r.Revision, err)
	}
	objs := make([]*unstructured.Unstructured, 0, len(list))
	for _, b := range list {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			return nil, fmt.Errorf("the objects of %s revision %d are corrupt: %w", r.Plugin, r.Revision, err)
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// setPhase rewrites the head of a revision with a new phase and message.
func (d *Deployer) setPhase(ctx context.Context, r *Record, phase, msg string) error {
	r.Phase, r.Message, r.Finished = phase, msg, time.Now().UTC().Round(time.Second)
	return d.writeHead(ctx, r)
}

// Inventories returns every installed plugin's newest release record, by plugin
// name; plugins an older kubeplug installed come from their ConfigMap inventories.
func (d *Deployer) Inventories(ctx context.Context) ([]*Record, error) {
	recs, err := d.heads(ctx, "")
	if err != nil {
		return nil, err
	}
	latest := map[string]*Record{}
	for _, r := range recs {
		latest[r.Plugin] = r // sorted by revision: the last wins
	}
	var list *corev1.ConfigMapList
	err = d.retry(ctx, func(ctx context.Context) error {
		var err error
		list, err = d.core.CoreV1().ConfigMaps(d.opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelInventory + "=true"})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("list inventories: %w", err)
	}
	if list != nil {
		for i := range list.Items {
			r, err := decodeLegacy(&list.Items[i])
			if err != nil {
				return nil, err
			}
			if latest[r.Plugin] == nil {
				latest[r.Plugin] = r
			}
		}
	}
	out := slices.Collect(maps.Values(latest))
	slices.SortFunc(out, func(a, b *Record) int { return strings.Compare(a.Plugin, b.Plugin) })
	return out, nil
}

// deleteRecords removes every revision of a plugin (heads first, so that no reader
// sees a revision without its chunks) and its ConfigMap inventory, if any.
func (d *Deployer) deleteRecords(ctx context.Context, plugin string) error {
	recs, err := d.heads(ctx, plugin)
	if err != nil {
		return err
	}
	for _, r := range slices.Backward(recs) {
		if err := d.deleteSecret(ctx, recordName(plugin, r.Revision)); err != nil {
			return fmt.Errorf("delete the release record of %s revision %d: %w", plugin, r.Revision, err)
		}
	}
	chunks, err := d.chunkNames(ctx, plugin)
	if err != nil {
		return err
	}
	for _, c := range chunks {
		if err := d.deleteSecret(ctx, c); err != nil {
			return fmt.Errorf("delete the release record chunk %s: %w", c, err)
		}
	}
	return d.retry(ctx, func(ctx context.Context) error {
		err := d.core.CoreV1().ConfigMaps(d.opts.Namespace).Delete(ctx, legacyInventoryName(plugin), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

func refsOf(objs []*unstructured.Unstructured) []ObjRef {
	out := make([]ObjRef, len(objs))
	for i, o := range objs {
		out[i] = refOf(o)
	}
	return out
}

func union(a, b []ObjRef) []ObjRef {
	seen := map[string]bool{}
	var out []ObjRef
	for _, r := range append(slices.Clone(a), b...) {
		if !seen[r.key()] {
			seen[r.key()] = true
			out = append(out, r)
		}
	}
	return sortedRefs(out)
}

// minus returns the refs of a that b does not have.
func minus(a, b []ObjRef) []ObjRef {
	in := map[string]bool{}
	for _, r := range b {
		in[r.key()] = true
	}
	var out []ObjRef
	for _, r := range a {
		if !in[r.key()] {
			out = append(out, r)
		}
	}
	return out
}
