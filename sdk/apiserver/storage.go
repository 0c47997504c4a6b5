package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Labels and annotations of the Secrets that hold objects. The object's own
// labels are copied beside them (so the API server selects by them); the
// prefix is the server's and refused on objects.
const (
	sdkPrefix        = "apiserver.sdk.kubeplug.dev/"
	labelResource    = sdkPrefix + "resource"
	labelNamespace   = sdkPrefix + "namespace"
	annotationName   = sdkPrefix + "name"
	dataKeyObject    = "object.json"
	clusterNamespace = "_cluster"
	// annotationUID and annotationCreated keep an object's uid and creation
	// time when its storage is not the one it was created in (moved from a
	// ConfigMap): the object keeps its identity.
	annotationUID     = sdkPrefix + "uid"
	annotationCreated = sdkPrefix + "created"
)

// SecretType is the type of the Secrets that keep a served API's objects.
const SecretType corev1.SecretType = "kubeplug.dev/served-storage"

// store keeps a group's objects as Secrets (of SecretType) in one namespace
// of the cluster: delegated storage. Secrets, not ConfigMaps, so that the
// roles that read a namespace without its secrets (view, and whatever grants
// ConfigMaps) do not read the objects. The Secret's resourceVersion, uid and
// creation time are the object's, so optimistic concurrency and watches are
// the API server's own.
type store struct {
	client    kubernetes.Interface
	namespace string
	group     string
	version   string
}

// cmName is the Secret of an object: a valid name whatever the object's
// name, different for every group, namespace and name, and sorting as the
// API server sorts the objects it keeps (by namespace, then name), so that
// the storage's pages come in the order of a built-in list. The form is
// <plural>-<hash of the group>.<namespace>.<name> (namespaces hold no dots,
// and "." sorts against the characters of names as the API server's "/"
// does); a name too long for that ends in a hash of the whole instead, and
// only such names may page out of order.
func (s *store) cmName(r Resource, ns, name string) string {
	g := sha256.Sum256([]byte(s.group))
	out := r.Plural + "-" + hex.EncodeToString(g[:3]) + "."
	if ns != "" {
		out += ns + "."
	}
	out += name
	if len(out) <= validation.DNS1123SubdomainMaxLength {
		return out
	}
	sum := sha256.Sum256([]byte(out))
	return out[:validation.DNS1123SubdomainMaxLength-17] + "-" + hex.EncodeToString(sum[:8])
}

func (s *store) selector(r Resource, ns string) string {
	sel := labelResource + "=" + r.Plural + "." + s.group
	if ns != "" {
		sel += "," + labelNamespace + "=" + ns
	}
	return sel
}

func (s *store) groupResource(r Resource) schema.GroupResource {
	return schema.GroupResource{Group: s.group, Resource: r.Plural}
}

// translate turns an error about a Secret into one about the object.
func (s *store) translate(err error, r Resource, name string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return apierrors.NewNotFound(s.groupResource(r), name)
	case apierrors.IsAlreadyExists(err):
		return apierrors.NewAlreadyExists(s.groupResource(r), name)
	case apierrors.IsConflict(err):
		return apierrors.NewConflict(s.groupResource(r), name, fmt.Errorf("the object has been modified; apply your changes to the latest version and try again"))
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		// A stale continue token or resourceVersion: 410, as the API server's
		// own lists say, for the client to start again.
		return apierrors.NewResourceExpired("the resourceVersion or continue token is too old: list again without it")
	case apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err):
		return err
	}
	return apierrors.NewInternalError(fmt.Errorf("storage: %w", err))
}

// decode turns a Secret back into the object it holds.
func (s *store) decode(sec *corev1.Secret) (*unstructured.Unstructured, error) {
	return decodeObject("Secret", &sec.ObjectMeta, sec.Data[dataKeyObject])
}

// decodeObject reads the object a storage object (its metadata and data)
// holds: its resourceVersion is the storage's, its uid and creation time the
// storage's unless the annotations keep earlier ones.
func decodeObject(kind string, m *metav1.ObjectMeta, raw []byte) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("storage %s %s: %w", kind, m.Name, err))
	}
	u.SetResourceVersion(m.ResourceVersion)
	u.SetUID(m.UID)
	u.SetCreationTimestamp(m.CreationTimestamp)
	if uid := m.Annotations[annotationUID]; uid != "" {
		u.SetUID(types.UID(uid))
	}
	if t, err := time.Parse(time.RFC3339, m.Annotations[annotationCreated]); err == nil {
		u.SetCreationTimestamp(metav1.NewTime(t))
	}
	return u, nil
}

// encode is the Secret that keeps u. An object's uid and creation time are
// kept in annotations when u has them (an update; they differ from the
// Secret's own only for an object moved from a ConfigMap).
func (s *store) encode(r Resource, u *unstructured.Unstructured) (*corev1.Secret, error) {
	cp := u.DeepCopy()
	unstructured.RemoveNestedField(cp.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(cp.Object, "metadata", "uid")
	unstructured.RemoveNestedField(cp.Object, "metadata", "creationTimestamp")
	raw, err := json.Marshal(cp.Object)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	ns := u.GetNamespace()
	nsLabel := ns
	if !r.Namespaced {
		nsLabel = clusterNamespace
	}
	lbls := map[string]string{}
	maps.Copy(lbls, u.GetLabels())
	lbls[labelResource] = r.Plural + "." + s.group
	lbls[labelNamespace] = nsLabel
	ann := map[string]string{annotationName: u.GetName()}
	if uid := u.GetUID(); uid != "" {
		ann[annotationUID] = string(uid)
		ann[annotationCreated] = u.GetCreationTimestamp().UTC().Format(time.RFC3339)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.cmName(r, ns, u.GetName()), Namespace: s.namespace,
			Labels:          lbls,
			Annotations:     ann,
			ResourceVersion: u.GetResourceVersion(),
		},
		Type: SecretType,
		Data: map[string][]byte{dataKeyObject: raw},
	}, nil
}

func (s *store) secrets() typedcorev1.SecretInterface {
	return s.client.CoreV1().Secrets(s.namespace)
}

func (s *store) get(ctx context.Context, r Resource, ns, name string) (*unstructured.Unstructured, error) {
	cm, err := s.secrets().Get(ctx, s.cmName(r, ns, name), metav1.GetOptions{})
	if err != nil {
		return nil, s.translate(err, r, name)
	}
	return s.decode(cm)
}

// list returns one page of a list: the storage's page, less what the field
// selector leaves out (a page may so be shorter than the limit and still have
// a continue token, as the API allows).
func (s *store) list(ctx context.Context, r Resource, q *listQuery) (*unstructured.UnstructuredList, error) {
	cms, err := s.secrets().List(ctx, q.storage)
	if err != nil {
		return nil, s.translate(err, r, "")
	}
	out := &unstructured.UnstructuredList{Object: map[string]any{}}
	out.SetResourceVersion(cms.ResourceVersion)
	out.SetContinue(q.encodeContinue(cms.Continue))
	if cms.RemainingItemCount != nil && !q.filtered {
		out.SetRemainingItemCount(cms.RemainingItemCount)
	}
	out.Items = []unstructured.Unstructured{}
	for i := range cms.Items {
		u, err := s.decode(&cms.Items[i])
		if err != nil {
			return nil, err
		}
		if q.matches(u) {
			out.Items = append(out.Items, *u)
		}
	}
	return out, nil
}

func (s *store) create(ctx context.Context, r Resource, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	u.SetResourceVersion("")
	u.SetUID("")
	u.SetCreationTimestamp(metav1.Time{})
	cm, err := s.encode(r, u)
	if err != nil {
		return nil, err
	}
	got, err := s.secrets().Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return nil, s.translate(err, r, u.GetName())
	}
	return s.decode(got)
}

// update replaces an object; without a resourceVersion it overwrites whatever
// is stored (as the API server does for an update without one).
func (s *store) update(ctx context.Context, r Resource, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	cm, err := s.encode(r, u)
	if err != nil {
		return nil, err
	}
	if cm.ResourceVersion == "" {
		cur, err := s.secrets().Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil {
			return nil, s.translate(err, r, u.GetName())
		}
		cm.ResourceVersion = cur.ResourceVersion
	}
	got, err := s.secrets().Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		return nil, s.translate(err, r, u.GetName())
	}
	return s.decode(got)
}

func (s *store) delete(ctx context.Context, r Resource, ns, name string) (*unstructured.Unstructured, error) {
	cur, err := s.get(ctx, r, ns, name)
	if err != nil {
		return nil, err
	}
	rv := cur.GetResourceVersion()
	err = s.secrets().Delete(ctx, s.cmName(r, ns, name), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	if err != nil {
		return nil, s.translate(err, r, name)
	}
	return cur, nil
}

// watch follows the Secrets of a resource and turns their events into the
// objects' events. Bookmarks (asked for, or the end of sendInitialEvents) keep
// their resourceVersion and annotations.
//
// A field selector the server checks itself turns events as the API server's
// watch cache does: an object that stops matching is DELETED, one that starts
// matching ADDED. Which objects matched when the watch starts is read at its
// resourceVersion (an exact list); without one, the storage's initial ADDED
// events say it.
func (s *store) watch(ctx context.Context, r Resource, q *listQuery) (watch.Interface, error) {
	var matched map[string]bool // Secret name -> the object matched when last seen
	if q.filtered {
		var err error
		if matched, err = s.matchedAt(ctx, r, q); err != nil {
			return nil, err
		}
	}
	w, err := s.secrets().Watch(ctx, q.storage)
	if err != nil {
		return nil, s.translate(err, r, "")
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		cm, ok := e.Object.(*corev1.Secret)
		if !ok {
			return e, e.Type == watch.Error
		}
		if e.Type == watch.Bookmark {
			b := &unstructured.Unstructured{Object: map[string]any{}}
			b.SetAPIVersion(s.group + "/" + s.version)
			b.SetKind(r.Kind)
			b.SetResourceVersion(cm.ResourceVersion)
			b.SetAnnotations(cm.Annotations)
			return watch.Event{Type: e.Type, Object: b}, true
		}
		u, err := s.decode(cm)
		if err != nil {
			return e, false
		}
		if matched == nil {
			return watch.Event{Type: e.Type, Object: u}, true
		}
		was, now := matched[cm.Name], q.matches(u)
		if e.Type == watch.Deleted {
			delete(matched, cm.Name)
			return watch.Event{Type: e.Type, Object: u}, was || now
		}
		matched[cm.Name] = now
		switch {
		case was && now:
			return watch.Event{Type: e.Type, Object: u}, true
		case was: // no longer matches: gone from this watch's view
			return watch.Event{Type: watch.Deleted, Object: u}, true
		case now: // matches now: new in this watch's view
			return watch.Event{Type: watch.Added, Object: u}, true
		}
		return e, false
	}), nil
}

// matchedAt lists, at the watch's resourceVersion, which objects its field
// selector matched then. Without a resourceVersion (or "0") the watch starts
// with ADDED events for every object, so nothing is listed.
func (s *store) matchedAt(ctx context.Context, r Resource, q *listQuery) (map[string]bool, error) {
	matched := map[string]bool{}
	rv := q.storage.ResourceVersion
	if rv == "" || rv == "0" {
		return matched, nil
	}
	opts := metav1.ListOptions{LabelSelector: q.storage.LabelSelector, FieldSelector: q.storage.FieldSelector,
		ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: 500}
	for {
		cms, err := s.secrets().List(ctx, opts)
		if err != nil {
			return nil, s.translate(err, r, "")
		}
		for i := range cms.Items {
			if u, err := s.decode(&cms.Items[i]); err == nil && q.matches(u) {
				matched[cms.Items[i].Name] = true
			}
		}
		if cms.Continue == "" {
			return matched, nil
		}
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = cms.Continue, "", ""
	}
}
