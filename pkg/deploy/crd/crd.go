package crd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
)

// ErrUnsafeCRDChange is matched (errors.Is) by the error that refuses a plugin whose
// new CustomResourceDefinitions would break objects or clients of the old ones.
var ErrUnsafeCRDChange = errors.New("unsafe CustomResourceDefinition change")

// CRDFinding is one unsafe change between the live and the new version of a
// CustomResourceDefinition.
type CRDFinding struct {
	// CRD is the definition's name, for example widgets.example.com.
	CRD string `json:"crd"`
	// Version is the API version concerned; empty for a change to the whole CRD
	// (its scope).
	Version string `json:"version,omitempty"`
	// Field is the field's path in the version's schema (.spec.size; [*] for the
	// items of an array, .* for the values of a map); empty for the version itself.
	Field string `json:"field,omitempty"`
	// Message says what changed.
	Message string `json:"message"`
}

// String renders "CustomResourceDefinition widgets.example.com: version v1: field
// .spec.size: type changed from integer to string".
func (f CRDFinding) String() string {
	s := "CustomResourceDefinition " + f.CRD + ": "
	if f.Version != "" {
		s += "version " + f.Version + ": "
	}
	if f.Field != "" {
		s += "field " + f.Field + ": "
	}
	return s + f.Message
}

// UnsafeCRDChangeError lists every unsafe change of a plugin's CRDs. It matches
// ErrUnsafeCRDChange.
type UnsafeCRDChangeError struct {
	Findings []CRDFinding
}

func (e *UnsafeCRDChangeError) Error() string {
	parts := make([]string, len(e.Findings))
	for i, f := range e.Findings {
		parts[i] = f.String()
	}
	return strings.Join(parts, "; ") + " (refused: existing objects or clients would break; apply with --force-crd-changes to make the change anyway)"
}

// Is reports whether target is ErrUnsafeCRDChange.
func (e *UnsafeCRDChangeError) Is(target error) bool { return target == ErrUnsafeCRDChange }

// CompareCRDs returns every unsafe change from live (as the cluster holds it, with
// its status) to desired (as the plugin would apply it), in a stable order. Unsafe
// are: a stored version (status.storedVersions) or a served version removed, a
// served version no longer served, the scope changed, and in a served version's
// openAPIV3Schema a field removed, a new required field, an enum narrowed, a type
// changed, or x-kubernetes-preserve-unknown-fields removed. Adding versions,
// fields, enum values or printer columns and changing descriptions are safe.
// Both objects are apiextensions.k8s.io/v1 CustomResourceDefinitions as
// unstructured JSON.
func CompareCRDs(live, desired map[string]any) []CRDFinding {
	name, _, _ := unstructured.NestedString(desired, "metadata", "name")
	var out []CRDFinding
	add := func(version, field, format string, args ...any) {
		out = append(out, CRDFinding{CRD: name, Version: version, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	ls, _, _ := unstructured.NestedString(live, "spec", "scope")
	ds, _, _ := unstructured.NestedString(desired, "spec", "scope")
	if ls != "" && ds != "" && ls != ds {
		add("", "", "scope changed from %s to %s", ls, ds)
	}
	stored, _, _ := unstructured.NestedStringSlice(live, "status", "storedVersions")
	lv, dv := crdVersions(live), crdVersions(desired)
	for _, l := range lv {
		d, ok := findVersion(dv, l.name)
		switch {
		case !ok && slices.Contains(stored, l.name):
			add(l.name, "", "removed, but objects are stored in it (status.storedVersions); migrate them and drop it from storedVersions first")
		case !ok && l.served:
			add(l.name, "", "removed while served")
		case ok && l.served && !d.served:
			add(l.name, "", "no longer served")
		case ok && l.served:
			for _, f := range compareSchema("", l.schema, d.schema) {
				add(l.name, f.field, "%s", f.message)
			}
		}
	}
	return out
}

type crdVersion struct {
	name   string
	served bool
	schema map[string]any
}

func crdVersions(crd map[string]any) []crdVersion {
	list, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	var out []crdVersion
	for _, v := range list {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "name")
		served, _, _ := unstructured.NestedBool(m, "served")
		s, _, _ := unstructured.NestedMap(m, "schema", "openAPIV3Schema")
		out = append(out, crdVersion{name: name, served: served, schema: s})
	}
	return out
}

func findVersion(vs []crdVersion, name string) (crdVersion, bool) {
	for _, v := range vs {
		if v.name == name {
			return v, true
		}
	}
	return crdVersion{}, false
}

type schemaFinding struct{ field, message string }

// compareSchema walks the live schema's properties, items and additionalProperties
// and reports what desired takes away. A live schema without a node (nil) allows
// anything, so nothing under it can be narrowed.
//
// Branches: one check per kind of breaking schema change (type, preserved fields,
// enum values, required fields, properties, items, additional properties), each a
// finding of its own.
func compareSchema(path string, live, desired map[string]any) []schemaFinding {
	if live == nil || desired == nil {
		return nil
	}
	var out []schemaFinding
	at := func(format string, args ...any) {
		f := path
		if f == "" {
			f = "."
		}
		out = append(out, schemaFinding{field: f, message: fmt.Sprintf(format, args...)})
	}
	lt, _ := live["type"].(string)
	dt, _ := desired["type"].(string)
	if lt != "" && dt != "" && lt != dt {
		at("type changed from %s to %s", lt, dt)
		return out // what is below a changed type cannot be compared
	}
	if truthy(live["x-kubernetes-preserve-unknown-fields"]) && !truthy(desired["x-kubernetes-preserve-unknown-fields"]) {
		at("x-kubernetes-preserve-unknown-fields removed (unknown fields of existing objects would be pruned)")
	}
	if le, de := enumValues(live["enum"]), enumValues(desired["enum"]); len(le) > 0 && len(de) > 0 {
		var gone []string
		for _, v := range le {
			if !slices.Contains(de, v) {
				gone = append(gone, v)
			}
		}
		if len(gone) > 0 {
			at("enum narrowed: %s no longer allowed", strings.Join(gone, ", "))
		}
	} else if len(le) == 0 && len(de) > 0 {
		at("enum added: only %s allowed now", strings.Join(de, ", "))
	}
	lreq, dreq := stringList(live["required"]), stringList(desired["required"])
	for _, r := range dreq {
		if !slices.Contains(lreq, r) {
			out = append(out, schemaFinding{field: path + "." + r, message: "new required field (existing objects may not set it)"})
		}
	}
	lp, _ := live["properties"].(map[string]any)
	dp, _ := desired["properties"].(map[string]any)
	keepsUnknown := truthy(desired["x-kubernetes-preserve-unknown-fields"]) || desired["additionalProperties"] != nil
	for _, k := range sortedKeys(lp) {
		child := path + "." + k
		d, ok := dp[k].(map[string]any)
		if !ok {
			if !keepsUnknown {
				out = append(out, schemaFinding{field: child, message: "removed (its values in existing objects would be pruned)"})
			}
			continue
		}
		l, _ := lp[k].(map[string]any)
		out = append(out, compareSchema(child, l, d)...)
	}
	if l, ok := live["items"].(map[string]any); ok {
		d, _ := desired["items"].(map[string]any)
		out = append(out, compareSchema(path+"[*]", l, d)...)
	}
	if l, ok := live["additionalProperties"].(map[string]any); ok {
		switch d := desired["additionalProperties"].(type) {
		case map[string]any:
			out = append(out, compareSchema(path+".*", l, d)...)
		case bool:
			if !d {
				at("additionalProperties removed (the map's entries would be pruned)")
			}
		case nil:
			if dp == nil && !truthy(desired["x-kubernetes-preserve-unknown-fields"]) {
				at("additionalProperties removed (the map's entries would be pruned)")
			}
		}
	}
	return out
}

func truthy(v any) bool { b, _ := v.(bool); return b }

// enumValues renders enum values as JSON, so that "1" and 1 differ.
func enumValues(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		b, _ := json.Marshal(e) // plain JSON values: cannot fail
		out = append(out, string(b))
	}
	return out
}

func stringList(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func isCRD(o *unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	return gvk.Group == crdResource.Group && gvk.Kind == "CustomResourceDefinition"
}

// Check compares each of a plugin's CRDs that the cluster already has with the
// live one and refuses unsafe changes with a *kube.UnitError wrapping an
// *UnsafeCRDChangeError. The deployer runs it before anything of the plugin is
// applied, so a refused plugin is left untouched.
func Check(ctx context.Context, c *kube.Client, plugin string, objs []*unstructured.Unstructured) error {
	var findings []CRDFinding
	for _, o := range objs {
		if !isCRD(o) {
			continue
		}
		var live *unstructured.Unstructured
		err := c.Retry(ctx, func(ctx context.Context) error {
			var err error
			live, err = c.Dynamic.Resource(crdResource).Get(ctx, o.GetName(), metav1.GetOptions{})
			return err
		})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return &kube.UnitError{Plugin: plugin, Object: kube.RefOf(o).String(), Err: fmt.Errorf("read the live CustomResourceDefinition to check the change: %w", err)}
		}
		findings = append(findings, CompareCRDs(live.Object, o.Object)...)
	}
	if len(findings) == 0 {
		return nil
	}
	return &kube.UnitError{Plugin: plugin, Err: &UnsafeCRDChangeError{Findings: findings}}
}
