package kubeschema

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// CRDGroupKind is the group and kind of a CustomResourceDefinition.
var CRDGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// FromCRDs returns the schemas of the kinds the given
// CustomResourceDefinitions (apiextensions.k8s.io/v1 objects, decoded) define,
// one per served version with an openAPIV3Schema. Their metadata is checked as
// the built-in ObjectMeta, as the API server does. A CRD whose schema cannot
// be converted is an error naming it; the others still count.
func FromCRDs(crds []map[string]any) (Source, []error) {
	models := map[string]*spec.Schema{}
	var errs []error
	for _, crd := range crds {
		name, _ := dig(crd, "metadata", "name").(string)
		group, _ := dig(crd, "spec", "group").(string)
		kind, _ := dig(crd, "spec", "names", "kind").(string)
		versions, _ := dig(crd, "spec", "versions").([]any)
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			version, _ := vm["name"].(string)
			raw := dig(vm, "schema", "openAPIV3Schema")
			if version == "" || kind == "" || raw == nil {
				continue
			}
			s, err := crdSchema(raw, schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
			if err != nil {
				errs = append(errs, fmt.Errorf("CustomResourceDefinition %s version %s: %w", name, version, err))
				continue
			}
			models[group+"/"+version+"/"+kind] = s
		}
	}
	if len(models) == 0 {
		return nil, errs
	}
	tc, err := managedfields.NewTypeConverter(models, false)
	if err != nil {
		return nil, append(errs, fmt.Errorf("converting the schemas of the CustomResourceDefinitions: %w", err))
	}
	return converterSource{tc: tc, meta: objectMeta()}, errs
}

// crdSchema turns a version's openAPIV3Schema into a model kube-openapi can
// convert: tagged with its kind, apiVersion and kind declared, and metadata
// left to the built-in ObjectMeta (a CRD's schema may only restrict name and
// generateName; the API server supplies the rest).
func crdSchema(raw any, gvk schema.GroupVersionKind) (*spec.Schema, error) {
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var s spec.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decoding openAPIV3Schema: %w", err)
	}
	if s.Properties == nil {
		s.Properties = map[string]spec.Schema{}
	}
	for _, f := range []string{"apiVersion", "kind"} {
		if _, ok := s.Properties[f]; !ok {
			s.Properties[f] = *spec.StringProperty()
		}
	}
	meta := spec.Schema{}
	meta.Type = spec.StringOrArray{"object"}
	meta.AddExtension("x-kubernetes-preserve-unknown-fields", true)
	s.Properties["metadata"] = meta
	s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}})
	return &s, nil
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}
