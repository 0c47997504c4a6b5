package state

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
	"github.com/kubeplug/kubeplug/pkg/deploy/internal/jsonenc"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/seal"
)

// Release records are Secrets of this type in the store's namespace. A revision is
// one head Secret, kubeplug.PLUGIN.vN, holding the gzipped JSON Record (small:
// object references, digests, status), and the gzipped JSON of the objects the
// revision applied: in the head itself when it is small (at most InlineMax
// compressed), else in chunk Secrets, split in ChunkSize pieces so that a release
// of any size stays below the API server's object limit.
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
	// objectsKey holds an inline revision's objects in its head.
	objectsKey = "objects"
)

// ChunkSize is the most compressed object data one chunk Secret holds.
var ChunkSize = 512 << 10

// InlineMax is the most compressed object data a revision keeps in its head
// rather than in chunks: one write instead of two for a small plugin, and a
// head that stays small to list.
var InlineMax = 16 << 10

// legacyInventoryKey and LabelInventory are the ConfigMap inventories kubeplug kept
// before release records; they are read as revision 1 and replaced.
const (
	legacyInventoryKey = "inventory.json.gz"
	LabelInventory     = "kubeplug.dev/inventory"
)

// Secrets is the Store that keeps records as Secrets in one namespace of the
// cluster it talks to (the CLI's store).
//
// It remembers the heads and chunks it read and wrote, so that the cleanup
// after a write (revisions beyond the history limit, chunks no head names)
// needs no LIST of what it already knows: after Histories, none of heads, and
// one of every plugin's chunks' metadata for the store's life. What it
// remembers is only trusted for that cleanup, which runs under the cluster's
// operation lease (no other writer meanwhile); reads always ask the cluster.
type Secrets struct {
	c          *kube.Client
	namespace  string
	historyMax int
	// sealer seals sensitive values in what records hold; nil seals nothing.
	sealer *seal.Sealer

	mu sync.Mutex
	// known holds each plugin's heads, oldest first, as last listed and since
	// written; allKnown says every head of the namespace was listed, so that a
	// plugin without an entry has none.
	known    map[string][]*Record
	allKnown bool
	// inline holds the objects of inline heads read or written, by head name.
	inline map[string]inlineObjects
	// chunks holds every chunk's name by plugin, once listed (nil before).
	chunks map[string]map[string]bool
	// shared, when set, answers reads of every head (ShareHeads).
	shared *Heads
}

// ShareHeads makes the store read every plugin's heads from h, listing them
// only when h must be filled, and keep h current with what it writes and
// deletes. Stores of runs against the same cluster and namespace share one h.
func (s *Secrets) ShareHeads(h *Heads) { s.shared = h }

// inlineObjects is an inline head's stored objects and their digest.
type inlineObjects struct {
	digest  string
	payload []byte
}

var _ Store = (*Secrets)(nil)

// NewSecrets returns the Store of records in namespace, keeping at most historyMax
// revisions per plugin. The namespace must exist before the first Write.
func NewSecrets(c *kube.Client, namespace string, historyMax int) *Secrets {
	return &Secrets{c: c, namespace: namespace, historyMax: historyMax, known: map[string][]*Record{}, inline: map[string]inlineObjects{}}
}

// SetSealer makes the store seal sensitive values in the records it writes (and
// open them in what it reads), with sl.
func (s *Secrets) SetSealer(sl *seal.Sealer) { s.sealer = sl }

func recordName(plugin string, rev int) string { return fmt.Sprintf("kubeplug.%s.v%d", plugin, rev) }

func legacyInventoryName(plugin string) string { return "kubeplug-inventory-" + plugin }

// gzipWriters and gzipReaders are reused: a gzip.Writer allocates ~800 KiB of
// compressor state, which costs far more than compressing a record head. Reset
// makes a reused writer write the same bytes as a new one.
//
// Records are written at gzip.BestSpeed: about twice as fast as the default
// level (whose Reset alone clears more memory than a head holds), for about a
// fifth more bytes. Any level reads back alike: what older kubeplugs wrote at
// the default level is read as before.
var (
	gzipWriters = sync.Pool{New: func() any { return newGzipWriter() }}
	gzipReaders sync.Pool
)

func newGzipWriter() *gzip.Writer {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: no error
	return zw
}

// gz compresses raw.
func gz(raw []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(raw)/4 + 64)
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&buf)
	_, _ = zw.Write(raw) // a bytes.Buffer does not fail
	_ = zw.Close()
	zw.Reset(nil) // hold no reference to buf while pooled
	gzipWriters.Put(zw)
	return buf.Bytes()
}

func gunzip(b []byte) ([]byte, error) {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(b))
	} else {
		err = zr.Reset(bytes.NewReader(b))
	}
	if err != nil {
		return nil, err
	}
	out := bytes.NewBuffer(make([]byte, 0, 4*len(b)))
	_, err = io.Copy(out, io.LimitReader(zr, 1<<30))
	if err == nil {
		gzipReaders.Put(zr)
	}
	return out.Bytes(), err
}

// headsPage is how many heads one request of a LIST of them reads.
var headsPage int64 = 250

// heads lists the record heads in the namespace, of one plugin or (plugin "") all,
// and remembers them.
func (s *Secrets) heads(ctx context.Context, plugin string) ([]*Record, error) {
	for range 2 {
		if plugin != "" || s.shared == nil {
			break
		}
		if out, ok := s.shared.all(); ok {
			return out, nil // what the store knows is the shared view: knownHeads
		}
		if err := s.fill(ctx); err != nil {
			return nil, err
		}
	}
	return s.listHeads(ctx, plugin) // or the shared view invalidated meanwhile
}

// fill lists every head and legacy inventory into the shared view, unless
// another store's fill did meanwhile.
func (s *Secrets) fill(ctx context.Context) error {
	return s.shared.fill(ctx, func() (l listed, err error) {
		if l.heads, err = s.listHeads(ctx, ""); err != nil {
			return listed{}, err
		}
		if l.legacy, err = s.listLegacy(ctx); err != nil {
			return listed{}, err
		}
		if l.chunks, err = s.listChunks(ctx); err != nil {
			return listed{}, err
		}
		if l.heads == nil {
			l.heads = []*Record{} // none: listed all the same
		}
		return l, nil
	})
}

// HistoriesFor is Histories of the named plugins and of every plugin whose
// newest revision is owner's (the CLI's: ""). On shared heads it reads those
// plugins' records only, from the shared view, listing nothing once that is
// filled: what one installation's apply reads of a cluster holding thousands.
func (s *Secrets) HistoriesFor(ctx context.Context, owner string, plugins []string) (map[string][]*Record, error) {
	for range 2 {
		if s.shared == nil {
			break
		}
		if hs, ok := s.shared.histories(owner, plugins); ok {
			return hs, nil
		}
		if err := s.fill(ctx); err != nil {
			return nil, err
		}
	}
	all, err := s.Histories(ctx) // no shared view, or one invalidated meanwhile
	if err != nil {
		return nil, err
	}
	hs := map[string][]*Record{}
	for p, h := range all {
		if h[len(h)-1].Owner == owner || slices.Contains(plugins, p) {
			hs[p] = h
		}
	}
	return hs, nil
}

// listHeads is heads from a LIST.
func (s *Secrets) listHeads(ctx context.Context, plugin string) ([]*Record, error) {
	sel := LabelOwner + "=kubeplug," + LabelPart + "=head"
	if plugin != "" {
		sel += "," + kube.LabelPlugin + "=" + plugin
	}
	var out []*Record
	inline := map[string]inlineObjects{}
	// By pages: each decoded and let go before the next is read, so that
	// reading thousands of heads holds one page of Secrets at a time.
	opts := metav1.ListOptions{LabelSelector: sel, Limit: headsPage}
	for {
		var list *corev1.SecretList
		err := s.c.Retry(ctx, func(ctx context.Context) error {
			var err error
			list, err = s.c.Core.CoreV1().Secrets(s.namespace).List(ctx, opts)
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
		for i := range list.Items {
			sec := &list.Items[i]
			if sec.Type != RecordType {
				continue
			}
			r, err := s.decodeHead(ctx, sec)
			if err != nil {
				return nil, err
			}
			if r.Inline {
				inline[sec.Name] = inlineObjects{digest: digestOf(sec.Data[objectsKey]), payload: bytes.Clone(sec.Data[objectsKey])}
			}
			out = append(out, r)
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	sortRecords(out)
	s.mu.Lock()
	for name, in := range inline {
		s.inline[name] = in
	}
	s.mu.Unlock()
	if plugin == "" {
		s.rememberAll(out)
		return out, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.known[plugin] = []*Record{}
	for _, r := range out {
		s.known[r.Plugin] = append(s.known[r.Plugin], r.Clone())
	}
	return out, nil
}

// rememberAll makes recs, every head of the namespace, what the store knows.
func (s *Secrets) rememberAll(recs []*Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.known, s.allKnown = map[string][]*Record{}, true
	for _, r := range recs {
		s.known[r.Plugin] = append(s.known[r.Plugin], r.Clone())
	}
}

// decodeHead reads the Record a head Secret holds.
func (s *Secrets) decodeHead(ctx context.Context, sec *corev1.Secret) (*Record, error) {
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
	return r, nil
}

func digestOf(payload []byte) string {
	sum := sha256.Sum256(payload)
	return "sha256:" + hex.EncodeToString(sum[:])
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
	err := s.c.Retry(ctx, func(ctx context.Context) error {
		err := s.c.Core.CoreV1().ConfigMaps(s.namespace).Delete(ctx, legacyInventoryName(plugin), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err == nil {
		s.shared.dropLegacy(plugin)
	}
	return err
}

// Write stores a revision. With objects, it encodes them and keeps them in the
// head when they are small (InlineMax), else first writes them in new chunk
// Secrets (named by their content, so rewriting a revision never touches chunks
// a head names); then it writes the head, then deletes chunks no head names
// (left by a run killed between the two) and revisions beyond the history
// limit. A reader therefore sees a revision whole or not at all. Without
// objects only the head is written, keeping the objects r names: its chunks, or
// the objects inline in its head, which the head written again carries (the
// store refuses to write an inline head whose objects it does not have).
func (s *Secrets) Write(ctx context.Context, r *Record, objects []*unstructured.Unstructured) error {
	if r.Legacy {
		return s.migrate(ctx, r)
	}
	var inline []byte
	switch {
	case objects != nil:
		payload, err := s.encodeObjects(ctx, r, objects)
		if err != nil {
			return err
		}
		if len(payload) <= InlineMax {
			r.Inline, r.Chunks, inline = true, nil, payload
		} else if err := s.writeChunks(ctx, r, payload); err != nil {
			return err
		}
		// Reached for inline revisions too, where nothing was written yet: a
		// run killed here leaves the previous head as it was either way.
		faultpoint.Hit("state:chunks-written")
	case r.Inline:
		var err error
		if inline, err = s.inlinePayload(ctx, r); err != nil {
			return fmt.Errorf("not writing the head of %s revision %d without its objects: %w", r.Plugin, r.Revision, err)
		}
	}
	if err := s.writeHead(ctx, r, inline); err != nil {
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

// encodeObjects is the stored form of a revision's objects: sealed, gzipped
// JSON. It sets r's Manifests and Count.
func (s *Secrets) encodeObjects(ctx context.Context, r *Record, objects []*unstructured.Unstructured) ([]byte, error) {
	raw, err := marshalObjects(objects)
	if err == nil {
		raw, err = s.sealer.Seal(ctx, raw)
	}
	if err != nil {
		return nil, fmt.Errorf("encode the objects of %s revision %d: %w", r.Plugin, r.Revision, err)
	}
	payload := gz(raw)
	r.Manifests, r.Count = digestOf(payload), len(objects)
	return payload, nil
}

// WriteChunks stores the objects of a revision in chunk Secrets and names them in
// r, without writing its head: the first half of Write for a revision too large
// to be inline, which is what a run killed between the two leaves behind (tests
// forge that state with it, whatever the size).
func (s *Secrets) WriteChunks(ctx context.Context, r *Record, objects []*unstructured.Unstructured) error {
	payload, err := s.encodeObjects(ctx, r, objects)
	if err != nil {
		return err
	}
	return s.writeChunks(ctx, r, payload)
}

func (s *Secrets) writeChunks(ctx context.Context, r *Record, payload []byte) error {
	r.Inline, r.Chunks = false, nil
	short := strings.TrimPrefix(r.Manifests, "sha256:")[:10]
	for i := 0; i == 0 || i*ChunkSize < len(payload); i++ {
		part := payload[i*ChunkSize : min((i+1)*ChunkSize, len(payload))]
		name := fmt.Sprintf("%s.%s.%d", recordName(r.Plugin, r.Revision), short, i)
		if err := s.createChunk(ctx, r, name, part); err != nil {
			return err
		}
		r.Chunks = append(r.Chunks, name)
	}
	return nil
}

// inlinePayload is the stored objects of inline revision r: as this store read
// or wrote them, else from its head in the cluster.
func (s *Secrets) inlinePayload(ctx context.Context, r *Record) ([]byte, error) {
	name := recordName(r.Plugin, r.Revision)
	s.mu.Lock()
	in, ok := s.inline[name]
	s.mu.Unlock()
	if ok && in.digest == r.Manifests {
		return in.payload, nil
	}
	var sec *corev1.Secret
	err := s.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		sec, err = s.c.Core.CoreV1().Secrets(s.namespace).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read the objects of %s revision %d (%s): %w", r.Plugin, r.Revision, name, err)
	}
	if err == nil && r.Manifests != "" && digestOf(sec.Data[objectsKey]) == r.Manifests {
		payload := sec.Data[objectsKey]
		s.mu.Lock()
		s.inline[name] = inlineObjects{digest: r.Manifests, payload: payload}
		s.mu.Unlock()
		return payload, nil
	}
	return nil, fmt.Errorf("the objects of %s revision %d are kept in its head %s, which does not hold them (digest %s)", r.Plugin, r.Revision, name, r.Manifests)
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
	err := s.c.Retry(ctx, func(ctx context.Context) error {
		_, err := s.c.Core.CoreV1().Secrets(s.namespace).Create(ctx, sec, metav1.CreateOptions{FieldManager: kube.FieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil // named by its content: the same bytes
		}
		if err != nil {
			return fmt.Errorf("write the release record of %s revision %d (%s): %w", r.Plugin, r.Revision, name, err)
		}
		return nil
	})
	if err == nil {
		s.mu.Lock()
		setChunk(s.chunks, r.Plugin, name, true)
		s.mu.Unlock()
		s.shared.chunk(r.Plugin, name, true)
	}
	return err
}

// writeHead applies r's head Secret, holding inline (r's objects, when r is
// Inline), and remembers it.
func (s *Secrets) writeHead(ctx context.Context, r *Record, inline []byte) error {
	raw, err := json.Marshal(r)
	if err == nil {
		raw, err = s.sealer.Seal(ctx, raw)
	}
	if err != nil {
		return fmt.Errorf("encode the release record of %s: %w", r.Plugin, err)
	}
	labels := recordLabels(r, "head")
	labels[LabelStatus] = r.Phase
	// A Secret's data is base64 in JSON, as encoding/json writes []byte.
	data := map[string]any{recordKey: base64.StdEncoding.EncodeToString(gz(raw))}
	if r.Inline {
		data[objectsKey] = base64.StdEncoding.EncodeToString(inline)
	}
	name := recordName(r.Plugin, r.Revision)
	body, err := jsonenc.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": string(RecordType),
		"metadata": map[string]any{
			"name": name, "namespace": s.namespace,
			"labels": toAny(labels),
			"annotations": map[string]any{
				"kubeplug.dev/version": r.Version, "kubeplug.dev/objects": strconv.Itoa(len(r.Objects)),
				"kubeplug.dev/description": s.sealer.Sensitive().String(r.Description),
			},
		},
		"data": data,
	})
	if err != nil {
		return fmt.Errorf("encode the release record of %s: %w", r.Plugin, err)
	}
	// Applied through the metadata client: the server answers with the
	// head's metadata in protobuf, not the whole Secret in JSON (nothing of
	// the answer is read).
	force := true
	err = s.c.Retry(ctx, func(ctx context.Context) error {
		_, err := s.c.Metadata.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(s.namespace).
			Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: kube.FieldManager, Force: &force})
		if err != nil {
			return fmt.Errorf("write the release record of %s revision %d: %w", r.Plugin, r.Revision, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.remember(r, inline)
	s.shared.put(r)
	return nil
}

// remember records a head this store wrote among the plugin's known heads.
func (s *Secrets) remember(r *Record, inline []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Inline {
		s.inline[recordName(r.Plugin, r.Revision)] = inlineObjects{digest: r.Manifests, payload: inline}
	}
	recs, ok := s.known[r.Plugin]
	if !ok && !s.allKnown {
		return // the plugin's other heads are not known: collect lists them
	}
	recs = slices.DeleteFunc(slices.Clone(recs), func(k *Record) bool { return k.Revision == r.Revision })
	recs = append(recs, r.Clone())
	sortRecords(recs)
	s.known[r.Plugin] = recs
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// collect deletes a plugin's revisions beyond the history limit (heads first) and
// then every chunk no remaining head names. It lists the plugin's heads only
// when the store does not know them, and every plugin's chunks once.
func (s *Secrets) collect(ctx context.Context, plugin string) error {
	recs, err := s.knownHeads(ctx, plugin)
	if err != nil {
		return err
	}
	if n := len(recs) - s.historyMax; n > 0 {
		for _, r := range recs[:n] {
			if err := s.deleteSecret(ctx, recordName(plugin, r.Revision)); err != nil {
				return fmt.Errorf("delete revision %d of %s: %w", r.Revision, plugin, err)
			}
			s.forget(r)
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
		s.forgetChunk(plugin, c)
	}
	return nil
}

// knownHeads is a plugin's heads, oldest first: as the store knows them, else
// listed.
func (s *Secrets) knownHeads(ctx context.Context, plugin string) ([]*Record, error) {
	if s.shared != nil {
		if recs, ok := s.shared.of(plugin); ok {
			return recs, nil // kept current by every store's writes and deletes
		}
	}
	s.mu.Lock()
	recs, ok := s.known[plugin]
	ok = ok || s.allKnown
	recs = slices.Clone(recs)
	s.mu.Unlock()
	if ok {
		return recs, nil
	}
	return s.heads(ctx, plugin)
}

// forget drops a deleted head from what the store knows.
func (s *Secrets) forget(r *Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if recs, ok := s.known[r.Plugin]; ok {
		s.known[r.Plugin] = slices.DeleteFunc(slices.Clone(recs), func(k *Record) bool { return k.Revision == r.Revision })
	}
	delete(s.inline, recordName(r.Plugin, r.Revision))
}

func (s *Secrets) forgetChunk(plugin, name string) {
	s.mu.Lock()
	if s.chunks != nil {
		delete(s.chunks[plugin], name)
	}
	s.mu.Unlock()
	s.shared.chunk(plugin, name, false)
}

// listChunks lists every chunk Secret's name by plugin, by metadata only.
func (s *Secrets) listChunks(ctx context.Context) (map[string]map[string]bool, error) {
	var list *metav1.PartialObjectMetadataList
	err := s.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		list, err = s.c.Metadata.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(s.namespace).
			List(ctx, metav1.ListOptions{LabelSelector: LabelOwner + "=kubeplug," + LabelPart + "=chunk"})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list the release record chunks in %s: %w", s.namespace, err)
	}
	all := map[string]map[string]bool{}
	for _, m := range list.Items {
		setChunk(all, m.Labels[kube.LabelPlugin], m.Name, true)
	}
	return all, nil
}

// chunkNames is a plugin's chunk Secrets: the first call lists every plugin's
// by metadata only (chunks are large), later ones use what the store knows.
func (s *Secrets) chunkNames(ctx context.Context, plugin string) ([]string, error) {
	if s.shared != nil {
		if names, ok := s.shared.chunksOf(plugin); ok {
			return names, nil // kept current by every store's creates and deletes
		}
	}
	s.mu.Lock()
	known := s.chunks != nil
	s.mu.Unlock()
	if !known {
		all, err := s.listChunks(ctx)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.chunks == nil {
			s.chunks = all
		} else {
			// Listed meanwhile by another plugin's write: keep both.
			for p, names := range all {
				if s.chunks[p] == nil {
					s.chunks[p] = map[string]bool{}
				}
				for n := range names {
					s.chunks[p][n] = true
				}
			}
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.chunks[plugin]))
	for n := range s.chunks[plugin] {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

func (s *Secrets) deleteSecret(ctx context.Context, name string) error {
	err := s.c.Retry(ctx, func(ctx context.Context) error {
		err := s.c.Core.CoreV1().Secrets(s.namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err == nil {
		s.shared.drop(name)
	}
	return err
}

// Objects reads the objects a revision applied: from its head when it is
// inline, else from its chunks.
func (s *Secrets) Objects(ctx context.Context, r *Record) ([]*unstructured.Unstructured, error) {
	var payload []byte
	switch {
	case r.Inline:
		var err error
		if payload, err = s.inlinePayload(ctx, r); err != nil {
			return nil, err
		}
	case !r.HasObjects():
		return nil, fmt.Errorf("plugin %s revision %d: %w", r.Plugin, r.Revision, ErrNoObjects)
	default:
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
	}
	if got := digestOf(payload); got != r.Manifests {
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
	// The inventories are listed while the heads are: every run reads both
	// before it can begin, one after the other cost a round trip more.
	var legacy []*Record
	var legacyErr error
	var listed sync.WaitGroup
	listed.Go(func() { legacy, legacyErr = s.listLegacy(ctx) })
	recs, err := s.heads(ctx, "")
	listed.Wait()
	if err != nil {
		return nil, err
	}
	if legacyErr != nil {
		return nil, legacyErr
	}
	hs := map[string][]*Record{}
	for _, r := range recs {
		hs[r.Plugin] = append(hs[r.Plugin], r) // sorted by plugin and revision
	}
	for _, r := range legacy {
		if hs[r.Plugin] == nil {
			hs[r.Plugin] = []*Record{r}
		}
	}
	return hs, nil
}

// listLegacy lists the ConfigMap inventories of an older kubeplug.
func (s *Secrets) listLegacy(ctx context.Context) ([]*Record, error) {
	var list *corev1.ConfigMapList
	err := s.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		list, err = s.c.Core.CoreV1().ConfigMaps(s.namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelInventory + "=true"})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("list inventories: %w", err)
	}
	var out []*Record
	if list != nil {
		for i := range list.Items {
			r, err := decodeLegacy(&list.Items[i])
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
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
		s.forget(r)
	}
	chunks, err := s.chunkNames(ctx, plugin)
	if err != nil {
		return err
	}
	for _, c := range chunks {
		if err := s.deleteSecret(ctx, c); err != nil {
			return fmt.Errorf("delete the release record chunk %s: %w", c, err)
		}
		s.forgetChunk(plugin, c)
	}
	return s.deleteLegacy(ctx, plugin)
}

// marshalObjects is json.Marshal(objects), written without reflection when
// jsonenc can write every object (it always can for objects decoded from
// JSON or YAML).
func marshalObjects(objects []*unstructured.Unstructured) ([]byte, error) {
	if objects == nil {
		return json.Marshal(objects)
	}
	b := make([]byte, 0, 1024*len(objects)+2)
	b = append(b, '[')
	for i, u := range objects {
		if i > 0 {
			b = append(b, ',')
		}
		ok := false
		if u != nil && u.Object != nil {
			b, ok = jsonenc.Append(b, u.Object)
		}
		if !ok {
			return json.Marshal(objects)
		}
	}
	return append(b, ']'), nil
}
