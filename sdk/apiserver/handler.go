package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
)

// serveAPI answers discovery, OpenAPI and the resources' verbs.
//
// Branches: one case per request kind (discovery, OpenAPI, and each verb), as the
// API server's own handler chain dispatches them.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	info, _ := genericrequest.RequestInfoFrom(r.Context())
	gv := s.opts.Group + "/" + s.opts.Version
	switch {
	case r.URL.Path == "/apis" || r.URL.Path == "/apis/":
		s.write(w, http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{s.group()}})
		return
	case r.URL.Path == "/apis/"+s.opts.Group:
		g := s.group()
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		s.write(w, http.StatusOK, &g)
		return
	case r.URL.Path == "/apis/"+gv:
		s.write(w, http.StatusOK, s.resourceList())
		return
	case r.URL.Path == "/openapi/v3":
		s.openapi.HandleDiscovery(w, r)
		return
	case r.URL.Path == "/openapi/v3/apis/"+gv:
		s.openapi.HandleGroupVersion(w, r)
		return
	case info == nil || !info.IsResourceRequest || info.APIGroup != s.opts.Group || info.APIVersion != s.opts.Version:
		s.fail(w, apierrors.NewNotFound(metav1.SchemeGroupVersion.WithResource("paths").GroupResource(), r.URL.Path))
		return
	}
	s.opts.Logger.Debug("request", "verb", info.Verb, "resource", info.Resource, "subresource", info.Subresource, "namespace", info.Namespace, "name", info.Name, "query", r.URL.RawQuery)
	k, ok := s.kinds[info.Resource]
	if !ok || (info.Subresource != "" && (info.Subresource != "status" || !k.res.Status)) {
		s.fail(w, apierrors.NewNotFound(metav1.SchemeGroupVersion.WithResource(info.Resource).GroupResource(), r.URL.Path))
		return
	}
	res := k.res
	if !res.Namespaced && info.Namespace != "" {
		s.fail(w, apierrors.NewBadRequest(res.Plural+" are cluster-scoped"))
		return
	}
	if res.Namespaced && info.Namespace == "" && info.Verb != "list" && info.Verb != "watch" {
		s.fail(w, apierrors.NewBadRequest(res.Plural+" are namespaced: the URL needs /namespaces/<namespace>/"))
		return
	}
	if info.Subresource == "status" && info.Verb != "get" && info.Verb != "update" && info.Verb != "patch" {
		s.fail(w, apierrors.NewMethodNotSupported(s.store.groupResource(res), info.Verb))
		return
	}
	ctx := r.Context()
	var (
		out runtime.Object
		err error
	)
	code := http.StatusOK
	switch info.Verb {
	case "get":
		out, err = s.store.get(ctx, res, info.Namespace, info.Name)
	case "list":
		var (
			q *listQuery
			l *unstructured.UnstructuredList
		)
		if q, err = s.parseList(r.URL.Query(), res, info.Namespace, false); err == nil {
			if l, err = s.store.list(ctx, res, q); err == nil {
				l.SetAPIVersion(gv)
				l.SetKind(res.Kind + "List")
				out = l
			}
		}
	case "watch":
		s.serveWatch(w, r, k, info.Namespace)
		return
	case "create":
		if out, err = s.create(w, r, k, info.Namespace); err == nil {
			code = http.StatusCreated
		}
	case "update":
		out, err = s.update(w, r, k, info.Namespace, info.Name, info.Subresource)
	case "patch":
		out, err = s.patch(w, r, k, info.Namespace, info.Name, info.Subresource)
	case "delete":
		out, err = s.store.delete(ctx, res, info.Namespace, info.Name)
	default:
		err = apierrors.NewMethodNotSupported(s.store.groupResource(res), info.Verb)
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	s.respond(w, r, k, code, out)
}

func (s *Server) group() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: s.opts.Group + "/" + s.opts.Version, Version: s.opts.Version}
	return metav1.APIGroup{Name: s.opts.Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
}

func (s *Server) resourceList() *metav1.APIResourceList {
	l := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: s.opts.Group + "/" + s.opts.Version}
	for _, r := range s.opts.Resources {
		l.APIResources = append(l.APIResources, metav1.APIResource{
			Name: r.Plural, Kind: r.Kind, Namespaced: r.Namespaced,
			SingularName: strings.ToLower(r.Kind),
			Verbs:        metav1.Verbs{"get", "list", "watch", "create", "update", "patch", "delete"},
		})
		if r.Status {
			l.APIResources = append(l.APIResources, metav1.APIResource{
				Name: r.Plural + "/status", Kind: r.Kind, Namespaced: r.Namespaced,
				Verbs: metav1.Verbs{"get", "update", "patch"},
			})
		}
	}
	return l
}

// create stores a new object. With a status subresource, the client's
// status is dropped (the status subresource sets it), as for a CRD.
func (s *Server) create(w http.ResponseWriter, r *http.Request, k *kind, ns string) (runtime.Object, error) {
	u, err := s.decodeBody(r)
	if err != nil {
		return nil, err
	}
	if err := s.checkPlacement(u, k.res, ns, ""); err != nil {
		return nil, err
	}
	live, _ := sameVersion{k}.New(k.gvk)
	u = k.fields.object.UpdateNoErrors(live, u, manager(r)).(*unstructured.Unstructured)
	return s.createPrepared(w, r, k, u)
}

// createPrepared stores a new object whose managed fields are set.
func (s *Server) createPrepared(w http.ResponseWriter, r *http.Request, k *kind, u *unstructured.Unstructured) (runtime.Object, error) {
	if k.res.Status {
		unstructured.RemoveNestedField(u.Object, "status")
	}
	u.SetGeneration(1)
	if err := s.admit(w, r, k, u); err != nil {
		return nil, err
	}
	if dryRun(r) {
		return u, nil
	}
	return s.store.create(r.Context(), k.res, u)
}

// update replaces an object, or its status through the status subresource.
func (s *Server) update(w http.ResponseWriter, r *http.Request, k *kind, ns, name, sub string) (runtime.Object, error) {
	u, err := s.decodeBody(r)
	if err != nil {
		return nil, err
	}
	if err := s.checkPlacement(u, k.res, ns, name); err != nil {
		return nil, err
	}
	cur, err := s.store.get(r.Context(), k.res, ns, name)
	if err != nil {
		return nil, err
	}
	u = k.fields.of(sub).UpdateNoErrors(cur, u, manager(r)).(*unstructured.Unstructured)
	next := prepareUpdate(k, sub, cur, u)
	if err := s.admit(w, r, k, next); err != nil {
		return nil, err
	}
	if dryRun(r) {
		return next, nil
	}
	return s.store.update(r.Context(), k.res, next)
}

// prepareUpdate is what an update stores: through the status subresource only
// the status changes; otherwise, with a status subresource, the status stays.
// The generation counts changes of anything but metadata and status, as the
// API server counts a CRD's.
func prepareUpdate(k *kind, sub string, cur, u *unstructured.Unstructured) *unstructured.Unstructured {
	if sub == "status" {
		next := cur.DeepCopy()
		if st, ok := u.Object["status"]; ok {
			next.Object["status"] = st
		} else {
			delete(next.Object, "status")
		}
		next.SetResourceVersion(u.GetResourceVersion())
		next.SetManagedFields(u.GetManagedFields())
		return next
	}
	if k.res.Status {
		if st, ok := cur.Object["status"]; ok {
			u.Object["status"] = st
		} else {
			delete(u.Object, "status")
		}
	}
	// The object's identity is the stored one, as the API server keeps it.
	u.SetUID(cur.GetUID())
	u.SetCreationTimestamp(cur.GetCreationTimestamp())
	gen := max(cur.GetGeneration(), 1)
	if !equality.Semantic.DeepEqual(withoutMeta(cur), withoutMeta(u)) {
		gen++
	}
	u.SetGeneration(gen)
	return u
}

func withoutMeta(u *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for k, v := range u.Object {
		if k != "metadata" && k != "status" {
			out[k] = v
		}
	}
	return out
}

func dryRun(r *http.Request) bool { return len(r.URL.Query()["dryRun"]) > 0 }

// decodeBody reads an object from a request.
func (s *Server) decodeBody(r *http.Request) (*unstructured.Unstructured, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 3<<20))
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		return nil, apierrors.NewBadRequest("the body is not a JSON object: " + err.Error())
	}
	return u, nil
}

// checkPlacement checks an object belongs where the URL says, and its name and
// labels.
func (s *Server) checkPlacement(u *unstructured.Unstructured, res Resource, ns, name string) error {
	gv := s.opts.Group + "/" + s.opts.Version
	switch {
	case u.GetAPIVersion() != gv || u.GetKind() != res.Kind:
		return apierrors.NewBadRequest(fmt.Sprintf("expected apiVersion %s and kind %s, found %q and %q", gv, res.Kind, u.GetAPIVersion(), u.GetKind()))
	case name != "" && u.GetName() != name:
		return apierrors.NewBadRequest(fmt.Sprintf("the name in the body (%q) does not match the URL (%q)", u.GetName(), name))
	}
	if res.Namespaced {
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		} else if u.GetNamespace() != ns {
			return apierrors.NewBadRequest(fmt.Sprintf("the namespace in the body (%q) does not match the URL (%q)", u.GetNamespace(), ns))
		}
	}
	gk := schema.GroupKind{Group: s.opts.Group, Kind: res.Kind}
	if errs := validation.IsDNS1123Subdomain(u.GetName()); len(errs) > 0 {
		return apierrors.NewInvalid(gk, u.GetName(), field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), u.GetName(), strings.Join(errs, "; "))})
	}
	// Labels are copied onto the storage's Secret for selectors: they must
	// be valid labels and leave the server's prefix alone.
	lp := field.NewPath("metadata", "labels")
	errs := metav1validation.ValidateLabels(u.GetLabels(), lp)
	for k := range u.GetLabels() {
		if strings.HasPrefix(k, sdkPrefix) {
			errs = append(errs, field.Invalid(lp.Key(k), k, "the prefix "+sdkPrefix+" is the server's own"))
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(gk, u.GetName(), errs)
	}
	return nil
}

// admit runs the kind's schema (pruning, defaults, validation, as the
// request's fieldValidation says) and then Options.Validate; warnings go to
// the client as Warning headers, as the API server sends them.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, k *kind, u *unstructured.Unstructured) error {
	fv := r.URL.Query().Get("fieldValidation")
	if fv == "" {
		fv = metav1.FieldValidationWarn
	}
	warnings, err := k.admit(u, fv)
	if err != nil {
		return err
	}
	for _, msg := range warnings {
		w.Header().Add("Warning", "299 - "+strconv.Quote(msg))
	}
	if s.opts.Validate != nil {
		if err := s.opts.Validate(r.Context(), u); err != nil {
			fe := field.Invalid(field.NewPath("spec"), nil, err.Error())
			_ = errors.As(err, &fe)
			return apierrors.NewInvalid(k.gvk.GroupKind(), u.GetName(), field.ErrorList{fe})
		}
	}
	return nil
}

// patch applies a JSON merge patch or a JSON patch to the stored object,
// again if another writer got in between (the patch itself names no
// resourceVersion), as the API server does.
func (s *Server) patch(w http.ResponseWriter, r *http.Request, k *kind, ns, name, sub string) (runtime.Object, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 3<<20))
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	for attempt := 0; ; attempt++ {
		out, err := s.patchOnce(w, r, k, ns, name, sub, ct, raw)
		if !apierrors.IsConflict(err) || attempt == 4 {
			return out, err
		}
	}
}

func (s *Server) patchOnce(w http.ResponseWriter, r *http.Request, k *kind, ns, name, sub, contentType string, patch []byte) (runtime.Object, error) {
	apply := contentType == string(types.ApplyPatchType)
	cur, err := s.store.get(r.Context(), k.res, ns, name)
	switch {
	case apply && apierrors.IsNotFound(err):
		cur = nil // an apply creates
	case err != nil:
		return nil, err
	}
	var u *unstructured.Unstructured
	if apply {
		u, err = s.serverSideApply(r, k, ns, name, sub, cur, patch)
	} else {
		u, err = applyPatch(cur, contentType, patch)
		var st apierrors.APIStatus
		if err != nil && !errors.As(err, &st) {
			err = apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", s.store.groupResource(k.res), name, err.Error(), 0, false)
		}
		if err == nil {
			err = s.checkPlacement(u, k.res, ns, name)
		}
		if err == nil {
			u = k.fields.of(sub).UpdateNoErrors(cur, u, manager(r)).(*unstructured.Unstructured)
		}
	}
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return s.createPrepared(w, r, k, u)
	}
	next := prepareUpdate(k, sub, cur, u)
	if err := s.admit(w, r, k, next); err != nil {
		return nil, err
	}
	if dryRun(r) {
		return next, nil
	}
	out, err := s.store.update(r.Context(), k.res, next)
	if apierrors.IsConflict(err) && next.GetResourceVersion() != cur.GetResourceVersion() {
		// The patch named a resourceVersion that is not current: no retry.
		return nil, err
	}
	return out, err
}

// serveWatch streams watch events as the API server does: one JSON object per
// event, flushed as it comes; each object a Table row or metadata when the
// client asks for it as for a list.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, k *kind, ns string) {
	q, err := s.parseList(r.URL.Query(), k.res, ns, true)
	if err != nil {
		s.fail(w, err)
		return
	}
	conv := negotiate(r)
	wi, err := s.store.watch(r.Context(), k.res, q)
	if err != nil {
		s.fail(w, err)
		return
	}
	defer wi.Stop()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case e, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			obj := e.Object
			if u, ok := obj.(*unstructured.Unstructured); ok {
				if obj, err = conv.convert(r.Context(), k, u); err != nil {
					s.opts.Logger.Error("watch event", "error", err)
					return
				}
			}
			if err := enc.Encode(map[string]any{"type": e.Type, "object": obj}); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}

// respond writes a result as the client asked for it: the object, a Table or
// metadata only.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, k *kind, code int, obj runtime.Object) {
	out, err := negotiate(r).convert(r.Context(), k, obj)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.write(w, code, out)
}

func (s *Server) write(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(obj)
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if status.Code >= 500 {
		s.opts.Logger.Error("request failed", "error", err)
	}
	s.write(w, int(status.Code), &status)
}
