package state

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/metadata"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/seal"
)

// Release records are Secrets of this type in the store's namespace. A revision is
// one head Secret, kubeplug.PLUGIN.vN, holding the gzipped JSON Record (small:
// object references, digests, status), and one or more chunk Secrets holding the
// gzipped JSON of the objects the revision applied, split in ChunkSize pieces so
// that a release of any size stays below the API server's object limit.
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

// Secrets is the Store that keeps records as Secrets in one namespace of the
// cluster it talks to (the CLI's store).
type Secrets struct {
	c          *kube.Client
	namespace  string
	historyMax int
	// sealer seals sensitive values in what records hold; nil seals nothing.
	sealer *seal.Sealer
}

var _ Store = (*Secrets)(nil)

// NewSecrets returns the Store of records in namespace, keeping at most historyMax
// revisions per plugin. The namespace must exist before the first Write.
func NewSecrets(c *kube.Client, namespace string, historyMax int) *Secrets {
	return &Secrets{c: c, namespace: namespace, historyMax: historyMax}
}

// SetSealer makes the store seal sensitive values in the records it writes (and
// open them in what it reads), with sl.
func (s *Secrets) SetSealer(sl *seal.Sealer) { s.sealer = sl }

func recordName(plugin string, rev int) string { return fmt.Sprintf("kubeplug.%s.v%d", plugin, rev) }

func legacyInventoryName(plugin string) string { return "kubeplug-inventory-" + plugin }

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
func (s *Secrets) heads(ctx context.Context, plugin string) ([]*Record, error) {
	sel := LabelOwner + "=kubeplug," + LabelPart + "=head"
	if plugin != "" {
		sel += "," + kube.LabelPlugin + "=" + plugin
	}
	var list *corev1.SecretList
	err := s.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		list, err = s.c.Core.CoreV1().Secrets(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		if plugin == "" {
			return nil, fmt.Errorf("list the release records in %s: %w", s.namespace, err)
		}
		return nil, fmt.Errorf("list the release records of %s: %w", plugin, err)
	}
	out := make([]*Record, 0, len(list.Items))
	for i := range list.Items {
		sec := &list.Items[i]
		if sec.Type != RecordType {
			continue
		}
		raw, err := gunzip(sec.Data[recordKey])
		if err == nil {
			raw, err = s.sealer.Unseal(ctx, raw)
		}
		if err != nil {
			return nil, fmt.Errorf("release record %s/%s: %w", sec.Namespace, sec.Name, err)
		}
		r := &Record{}
		if err := json.Unmarshal(raw, r); err != nil {
			return nil, fmt.Errorf("release record %s/%s is corrupt: %w", sec.Namespace, sec.Name, err)
		}
		out = append(out, r)
	}
	sortRecords(out)
	return out, nil
}

// History returns a plugin's revisions, oldest first: its release records, or the
// ConfigMap inventory of an older kubeplug as revision 1; none when not installed.
func (s *Secrets) History(ctx context.Context, plugin string) ([]*Record, error) {
	recs, err := s.heads(ctx, plugin)
	if err != nil || len(recs) > 0 {
		return recs, err
	}
	old, err := s.readLegacy(ctx, plugin)
	if err != nil || old == nil {
		return nil, err
	}
	return []*Record{old}, nil
}

// readLegacy reads the ConfigMap inventory of an older kubeplug, nil when none.
func (s *Secrets) readLegacy(ctx context.Context, plugin string) (*Record, error) {
	var cm *corev1.ConfigMap
	err := s.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		cm, err = s.c.Core.CoreV1().ConfigMaps(s.namespace).Get(ctx, legacyInventoryName(plugin), metav1.GetOptions{})
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
	r.Revision, r.Legacy = 1, true
	r.Started = cm.CreationTimestamp.Time
	r.Description = "migrated from the inventory ConfigMap " + cm.Name + " (objects not recorded: no rollback to it)"
	return r, nil
}

// migrate stores a ConfigMap inventory as revision 1 and deletes the ConfigMap.
func (s *Secrets) migrate(ctx context.Context, r *Record) error {
	r.Legacy = false
	if err := s.Write(ctx, r, nil); err != nil {
		return err
	}
	return s.deleteLegacy(ctx, r.Plugin)
}

func (s *Secrets) deleteLegacy(ctx context.Context, plugin string) error {
	return s.c.Retry(ctx, func(ctx context.Context) error {
		err := s.c.Core.CoreV1().ConfigMaps(s.namespace).Delete(ctx, legacyInventoryName(plugin), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// Write stores a revision. With objects, it first writes them in new chunk
// Secrets (named by their content, so rewriting a revision never touches chunks a
// head names), then the head that names them, then deletes chunks no head names
// (left by a run killed between the two) and revisions beyond the history limit.
// A reader therefore sees a revision whole or not at all. Without objects only the
// head is written, naming the chunks r already has.
func (s *Secrets) Write(ctx context.Context, r *Record, objects []*unstructured.Unstructured) error {
	if r.Legacy {
		return s.migrate(ctx, r)
	}
	if objects != nil {
		if err := s.WriteChunks(ctx, r, objects); err != nil {
			return err
		}
		faultpoint.Hit("state:chunks-written")
	}
	if err := s.writeHead(ctx, r); err != nil {
		return err
	}
	faultpoint.Hit("state:head-written")
	if objects != nil {
		if err := s.collect(ctx, r.Plugin); err != nil {
			return err
		}
	}
	return nil
}

// WriteChunks stores the objects of a revision in chunk Secrets and names them in
// r, without writing its head: the first half of Write, which is what a run killed
// between the two leaves behind (tests forge that state with it).
func (s *Secrets) WriteChunks(ctx context.Context, r *Record, objects []*unstructured.Unstructured) error {
	raw, err := json.Marshal(objects)
	if err == nil {
		raw, err = s.sealer.Seal(ctx, raw)
	}
	if err != nil {
		return fmt.Errorf("encode the objects of %s revision %d: %w", r.Plugin, r.Revision, err)
	}
	payload := gz(raw)
	sum := sha256.Sum256(payload)
	r.Manifests, r.Count, r.Chunks = "sha256:"+hex.EncodeToString(sum[:]), len(objects), nil
	for i := 0; i == 0 || i*ChunkSize < len(payload); i++ {
		part := payload[i*ChunkSize : min((i+1)*ChunkSize, len(payload))]
		name := fmt.Sprintf("%s.%s.%d", recordName(r.Plugin, r.Revision), hex.EncodeToString(sum[:5]), i)
		if err := s.createChunk(ctx, r, name, part); err != nil {
			return err
		}
		r.Chunks = append(r.Chunks, name)
	}
	return nil
}

func recordLabels(r *Record, part string) map[string]string {
	return map[string]string{
		LabelOwner: "kubeplug", kube.LabelManagedBy: kube.FieldManager, kube.LabelPlugin: r.Plugin,
		LabelRevision: strconv.Itoa(r.Revision), LabelPart: part,
	}
}

func (s *Secrets) createChunk(ctx context.Context, r *Record, name string, data []byte) error {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.namespace, Labels: recordLabels(r, "chunk")},
		Type:       RecordType,
		Data:       map[string][]byte{chunkKey: data},
	}
	return s.c.Retry(ctx, func(ctx context.Context) error {
		_, err := s.c.Core.CoreV1().Secrets(s.namespace).Create(ctx, sec, metav1.CreateOptions{FieldManager: kube.FieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil // named by its content: the same bytes
		}
		if err != nil {
			return fmt.Errorf("write the release record of %s revision %d (%s): %w", r.Plugin, r.Revision, name, err)
		}
		return nil
	})
}

func (s *Secrets) writeHead(ctx context.Context, r *Record) error {
	raw, err := json.Marshal(r)
	if err == nil {
		raw, err = s.sealer.Seal(ctx, raw)
	}
	if err != nil {
		return fmt.Errorf("encode the release record of %s: %w", r.Plugin, err)
	}
	labels := recordLabels(r, "head")
	labels[LabelStatus] = r.Phase
	sec := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": string(RecordType),
		"metadata": map[string]any{
			"name": recordName(r.Plugin, r.Revision), "namespace": s.namespace,
			"labels": toAny(labels),
			"annotations": map[string]any{
				"kubeplug.dev/version": r.Version, "kubeplug.dev/objects": strconv.Itoa(len(r.Objects)),
				"kubeplug.dev/description": s.sealer.Sensitive().String(r.Description),
			},
		},
		"data": map[string]any{recordKey: gz(raw)},
	}}
	return s.c.Retry(ctx, func(ctx context.Context) error {
		_, err := s.c.Dynamic.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(s.namespace).
			Apply(ctx, sec.GetName(), sec, metav1.ApplyOptions{FieldManager: kube.FieldManager, Force: true})
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

// collect deletes a plugin's revisions beyond the history limit (heads first) and
// then every chunk no remaining head names.
func (s *Secrets) collect(ctx context.Context, plugin string) error {
	recs, err := s.heads(ctx, plugin)
	if err != nil {
		return err
	}
	if n := len(recs) - s.historyMax; n > 0 {
		for _, r := range recs[:n] {
			if err := s.deleteSecret(ctx, recordName(plugin, r.Revision)); err != nil {
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
	chunks, err := s.chunkNames(ctx, plugin)
	if err != nil {
		return err
	}
	for _, c := range chunks {
		if named[c] {
			continue
		}
		if err := s.deleteSecret(ctx, c); err != nil {
			return fmt.Errorf("delete the orphaned record chunk %s of %s: %w", c, plugin, err)
		}
	}
	return nil
}

// chunkNames lists a plugin's chunk Secrets by metadata only: chunks are large.
func (s *Secrets) chunkNames(ctx context.Context, plugin string) ([]string, error) {
	mc, err := metadata.NewForConfig(s.c.Config)
	if err != nil {
		return nil, err
	}
	var list *metav1.PartialObjectMetadataList
	err = s.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		list, err = mc.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(s.namespace).
			List(ctx, metav1.ListOptions{LabelSelector: LabelOwner + "=kubeplug," + LabelPart + "=chunk," + kube.LabelPlugin + "=" + plugin})
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

func (s *Secrets) deleteSecret(ctx context.Context, name string) error {
	return s.c.Retry(ctx, func(ctx context.Context) error {
		err := s.c.Core.CoreV1().Secrets(s.namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// Objects reads the objects a revision applied from its chunks.
func (s *Secrets) Objects(ctx context.Context, r *Record) ([]*unstructured.Unstructured, error) {
	if len(r.Chunks) == 0 {
		return nil, fmt.Errorf("plugin %s revision %d: %w", r.Plugin, r.Revision, ErrNoObjects)
	}
	var payload []byte
	for _, name := range r.Chunks {
		var sec *corev1.Secret
		err := s.c.Retry(ctx, func(ctx context.Context) error {
			var err error
			sec, err = s.c.Core.CoreV1().Secrets(s.namespace).Get(ctx, name, metav1.GetOptions{})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("read the objects of %s revision %d (%s): %w", r.Plugin, r.Revision, name, err)
		}
		payload = append(payload, sec.Data[chunkKey]...)
	}
	sum := sha256.Sum256(payload)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != r.Manifests {
		return nil, fmt.Errorf("the objects of %s revision %d are corrupt: digest %s, recorded %s", r.Plugin, r.Revision, got, r.Manifests)
	}
	raw, err := gunzip(payload)
	if err != nil {
		return nil, fmt.Errorf("the objects of %s revision %d are corrupt: %w", r.Plugin, r.Revision, err)
	}
	if raw, err = s.sealer.Unseal(ctx, raw); err != nil {
		return nil, fmt.Errorf("the objects of %s revision %d: %w", r.Plugin, r.Revision, err)
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

// Latest returns every installed plugin's newest release record, by plugin name;
// plugins an older kubeplug installed come from their ConfigMap inventories.
func (s *Secrets) Latest(ctx context.Context) ([]*Record, error) {
	hs, err := s.Histories(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Record, 0, len(hs))
	for _, h := range hs {
		out = append(out, h[len(h)-1])
	}
	slices.SortFunc(out, func(a, b *Record) int { return strings.Compare(a.Plugin, b.Plugin) })
	return out, nil
}

// Histories returns every installed plugin's revisions with two LISTs: the
// heads, and the ConfigMap inventories of an older kubeplug (revision 1 of a
// plugin that has no head).
func (s *Secrets) Histories(ctx context.Context) (map[string][]*Record, error) {
	recs, err := s.heads(ctx, "")
	if err != nil {
		return nil, err
	}
	hs := map[string][]*Record{}
	for _, r := range recs {
		hs[r.Plugin] = append(hs[r.Plugin], r) // sorted by plugin and revision
	}
	var list *corev1.ConfigMapList
	err = s.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		list, err = s.c.Core.CoreV1().ConfigMaps(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelInventory + "=true"})
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
			if hs[r.Plugin] == nil {
				hs[r.Plugin] = []*Record{r}
			}
		}
	}
	return hs, nil
}

// Delete removes every revision of a plugin (heads first, so that no reader sees a
// revision without its chunks) and its ConfigMap inventory, if any.
func (s *Secrets) Delete(ctx context.Context, plugin string) error {
	recs, err := s.heads(ctx, plugin)
	if err != nil {
		return err
	}
	for _, r := range slices.Backward(recs) {
		if err := s.deleteSecret(ctx, recordName(plugin, r.Revision)); err != nil {
			return fmt.Errorf("delete the release record of %s revision %d: %w", plugin, r.Revision, err)
		}
	}
	chunks, err := s.chunkNames(ctx, plugin)
	if err != nil {
		return err
	}
	for _, c := range chunks {
		if err := s.deleteSecret(ctx, c); err != nil {
			return fmt.Errorf("delete the release record chunk %s: %w", c, err)
		}
	}
	return s.deleteLegacy(ctx, plugin)
}
