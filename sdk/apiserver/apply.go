package apiserver

import (
	"fmt"
	"net/http"
	"strings"

	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"
)

// fieldManagers track managed fields and merge server-side applies with
// k8s.io/apimachinery's field manager, typed by the kind's schema as the
// API server types a CRD's: one for the object, one for its status
// subresource, each resetting what the other owns.
type fieldManagers struct {
	object, status *managedfields.FieldManager
}

func newFieldManagers(k *kind) (*fieldManagers, error) {
	sp, err := builder.BuildOpenAPIV3(k.crd, k.gvk.Version, builder.Options{V2: false, StripValueValidation: true, StripNullable: true})
	if err != nil {
		return nil, err
	}
	models := map[string]*spec.Schema{}
	for name, s := range sp.Components.Schemas {
		models[name] = s
	}
	tc, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		return nil, fmt.Errorf("apiserver: resource %s: types for server-side apply: %w", k.res.Plural, err)
	}
	gv := k.gvk.GroupVersion()
	av := fieldpath.APIVersion(gv.String())
	conv := sameVersion{k}
	objectReset := map[fieldpath.APIVersion]fieldpath.Filter{}
	if k.res.Status {
		objectReset[av] = fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status")))
	}
	fm := &fieldManagers{}
	if fm.object, err = managedfields.NewDefaultCRDFieldManager(tc, conv, conv, conv, k.gvk, gv, "", objectReset); err != nil {
		return nil, err
	}
	if k.res.Status {
		statusReset := map[fieldpath.APIVersion]fieldpath.Filter{av: fieldpath.NewIncludeMatcherFilter(fieldpath.MakePrefixMatcherOrDie("status"))}
		if fm.status, err = managedfields.NewDefaultCRDFieldManager(tc, conv, conv, conv, k.gvk, gv, "status", statusReset); err != nil {
			return nil, err
		}
	}
	return fm, nil
}

func (f *fieldManagers) of(sub string) *managedfields.FieldManager {
	if sub == "status" {
		return f.status
	}
	return f.object
}

// sameVersion converts, defaults and makes new objects of a kind served in
// one version: nothing to convert.
type sameVersion struct{ k *kind }

func (c sameVersion) Convert(in, out, _ any) error {
	u, ok1 := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	o.Object = u.DeepCopy().Object
	return nil
}

func (c sameVersion) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	if t, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{c.k.gvk}); !ok || t != c.k.gvk {
		return nil, fmt.Errorf("%s is served in %s only", c.k.gvk.Kind, c.k.gvk.GroupVersion())
	}
	return in, nil
}

func (c sameVersion) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

func (c sameVersion) Default(in runtime.Object) {
	if u, ok := in.(*unstructured.Unstructured); ok && c.k.structural != nil {
		structuraldefaulting.Default(u.Object, c.k.structural)
	}
}

func (c sameVersion) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// manager is the field manager a request names, or its user agent's
// program, as the API server defaults it.
func manager(r *http.Request) string {
	if m := r.URL.Query().Get("fieldManager"); m != "" {
		return m
	}
	ua, _, _ := strings.Cut(r.UserAgent(), "/")
	return ua
}

// serverSideApply merges an apply configuration into the object (cur nil:
// none yet) for the request's field manager; a field another manager owns is
// a 409 naming it unless force=true.
func (s *Server) serverSideApply(r *http.Request, k *kind, ns, name, sub string, cur *unstructured.Unstructured, patch []byte) (*unstructured.Unstructured, error) {
	mgr := r.URL.Query().Get("fieldManager")
	if mgr == "" {
		return nil, apierrors.NewBadRequest("fieldManager is required for apply requests")
	}
	applied := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(patch, &applied.Object); err != nil {
		return nil, apierrors.NewBadRequest("the apply configuration is not YAML or JSON: " + err.Error())
	}
	if err := s.checkPlacement(applied, k.res, ns, name); err != nil {
		return nil, err
	}
	live := cur
	if live == nil {
		if sub != "" {
			return nil, apierrors.NewNotFound(s.store.groupResource(k.res), name)
		}
		live = &unstructured.Unstructured{Object: map[string]any{}}
		live.SetGroupVersionKind(k.gvk)
		live.SetName(name)
		live.SetNamespace(applied.GetNamespace())
	}
	out, err := k.fields.of(sub).Apply(live, applied, mgr, r.URL.Query().Get("force") == "true")
	if err != nil {
		return nil, err
	}
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("apply returned %T", out))
	}
	return u, nil
}
