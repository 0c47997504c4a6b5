package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Labels and annotations of the ConfigMaps that hold objects. The object's own
// labels are copied beside them (so the API server selects by them); the
// prefix is the server's and refused on objects.
const (
	sdkPrefix        = "apiserver.sdk.kubeplug.dev/"
	labelResource    = sdkPrefix + "resource"
	labelNamespace   = sdkPrefix + "namespace"
	annotationName   = sdkPrefix + "name"
	dataKeyObject    = "object.json"
	clusterNamespace = "_cluster"
)

// store keeps a group's objects as ConfigMaps in one namespace of the cluster:
// delegated storage. The ConfigMap's resourceVersion, uid and creation time are
// the object's, so optimistic concurrency and watches are the API server's own.
type store struct {
	client    kubernetes.Interface
	namespace string
	group     string
	version   string
}

// cmName is the ConfigMap of an object: a valid name whatever the object's
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

// translate turns an error about a ConfigMap into one about the object.
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

// decode turns a ConfigMap back into the object it holds.
func (s *store) decode(cm *corev1.ConfigMap) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(cm.Data[dataKeyObject]), &u.Object); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("storage ConfigMap %s: %w", cm.Name, err))
	}
	u.SetResourceVersion(cm.ResourceVersion)
	u.SetUID(cm.UID)
	u.SetCreationTimestamp(cm.CreationTimestamp)
	return u, nil
}

func (s *store) encode(r Resource, u *unstructured.Unstructured) (*corev1.ConfigMap, error) {
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
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.cmName(r, ns, u.GetName()), Namespace: s.namespace,
			Labels:          lbls,
			Annotations:     map[string]string{annotationName: u.GetName()},
			ResourceVersion: u.GetResourceVersion(),
		},
		Data: map[string]string{dataKeyObject: string(raw)},
	}, nil
}

func (s *store) get(ctx context.Context, r Resource, ns, name string) (*unstructured.Unstructured, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.cmName(r, ns, name), metav1.GetOptions{})
	if err != nil {
		return nil, s.translate(err, r, name)
	}
	return s.decode(cm)
}

// list returns one page of a list: the storage's page, less what the field
// selector leaves out (a page may so be shorter than the limit and still have
// a continue token, as the API allows).
func (s *store) list(ctx context.Context, r Resource, q *listQuery) (*unstructured.UnstructuredList, error) {
	cms, err := s.client.CoreV1().ConfigMaps(s.namespace).List(ctx, q.storage)
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
	cm, err := s.encode(r, u)
	if err != nil {
		return nil, err
	}
	got, err := s.client.CoreV1().ConfigMaps(s.namespace).Create(ctx, cm, metav1.CreateOptions{})
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
		cur, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil {
			return nil, s.translate(err, r, u.GetName())
		}
		cm.ResourceVersion = cur.ResourceVersion
	}
	got, err := s.client.CoreV1().ConfigMaps(s.namespace).Update(ctx, cm, metav1.UpdateOptions{})
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
	err = s.client.CoreV1().ConfigMaps(s.namespace).Delete(ctx, s.cmName(r, ns, name), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	if err != nil {
		return nil, s.translate(err, r, name)
	}
	return cur, nil
}

// watch follows the ConfigMaps of a resource and turns their events into the
// objects' events. Bookmarks (asked for, or the end of sendInitialEvents) keep
// their resourceVersion and annotations.
//
// A field selector the server checks itself turns events as the API server's
// watch cache does: an object that stops matching is DELETED, one that starts
// matching ADDED. Which objects matched when the watch starts is read at its
// resourceVersion (an exact list); without one, the storage's initial ADDED
// events say it.
func (s *store) watch(ctx context.Context, r Resource, q *listQuery) (watch.Interface, error) {
	var matched map[string]bool // ConfigMap name -> the object matched when last seen
	if q.filtered {
		var err error
		if matched, err = s.matchedAt(ctx, r, q); err != nil {
			return nil, err
		}
	}
	w, err := s.client.CoreV1().ConfigMaps(s.namespace).Watch(ctx, q.storage)
	if err != nil {
		return nil, s.translate(err, r, "")
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		cm, ok := e.Object.(*corev1.ConfigMap)
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
		cms, err := s.client.CoreV1().ConfigMaps(s.namespace).List(ctx, opts)
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

// migrateNames moves objects stored under an earlier ConfigMap naming (a
// hash of group, resource, namespace and name, before lists paged in the API
// server's order) to the current one, so that a plugin upgrade does not lose
// the objects its API already holds: each is written again under cmName,
// with its labels copied as selectors need them, and the old ConfigMap is
// deleted (only that one: a UID precondition). Run once when the server
// starts; a re-run after an interruption finishes the move.
func (s *store) migrateNames(ctx context.Context, resources []Resource) error {
	for _, r := range resources {
		opts := metav1.ListOptions{LabelSelector: s.selector(r, ""), Limit: 500}
		for {
			cms, err := s.client.CoreV1().ConfigMaps(s.namespace).List(ctx, opts)
			if err != nil {
				return fmt.Errorf("apiserver: list the storage of %s: %w", r.Plural, err)
			}
			for i := range cms.Items {
				cm := &cms.Items[i]
				u, err := s.decode(cm)
				if err != nil {
					return err
				}
				want := s.cmName(r, u.GetNamespace(), u.GetName())
				if cm.Name == want {
					continue
				}
				u.SetResourceVersion("")
				next, err := s.encode(r, u)
				if err != nil {
					return err
				}
				if _, err := s.client.CoreV1().ConfigMaps(s.namespace).Create(ctx, next, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					return fmt.Errorf("apiserver: move %s %s/%s to storage %s: %w", r.Kind, u.GetNamespace(), u.GetName(), want, err)
				}
				uid := cm.UID
				if err := s.client.CoreV1().ConfigMaps(s.namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("apiserver: remove the old storage %s of %s %s/%s: %w", cm.Name, r.Kind, u.GetNamespace(), u.GetName(), err)
				}
			}
			if cms.Continue == "" {
				break
			}
			opts.Continue = cms.Continue
		}
	}
	return nil
}
