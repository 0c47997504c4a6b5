package kubeschema

import (
	"slices"
	"sync"

	apiextensionsac "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration"
	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
)

// builtin holds the converters of the kinds compiled in, parsed at first use.
var builtin = sync.OnceValue(func() Sources {
	return Sources{
		converterSource{tc: applyconfigurations.NewTypeConverter(scheme.Scheme)},
		converterSource{tc: apiextensionsac.NewTypeConverter(apiextensionsscheme.Scheme)},
	}
})

// Builtin returns the schemas of the kinds built into Kubernetes, as client-go
// and apiextensions-apiserver of kubeplug's build know them: the core and
// apps kinds, RBAC, CustomResourceDefinition and the rest. It needs no
// cluster.
func Builtin() Source { return builtin() }

// objectMeta is the type of every object's metadata, from the built-in schemas.
var objectMeta = sync.OnceValue(func() *Type {
	t, ok, _ := builtin().Type(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	if !ok {
		return nil
	}
	atom, ok := t.schema.Resolve(t.ref)
	if !ok || atom.Map == nil {
		return nil
	}
	f, ok := atom.FindField("metadata")
	if !ok {
		return nil
	}
	return &Type{schema: t.schema, ref: f.Type}
})

// BuiltinKinds returns the kinds of gv that the built-in schemas know, sorted:
// the names a mistyped kind is compared with.
func BuiltinKinds(gv schema.GroupVersion) []string {
	var out []string
	for _, sch := range []*runtime.Scheme{scheme.Scheme, apiextensionsscheme.Scheme} {
		for k := range sch.KnownTypes(gv) {
			if _, ok, _ := builtin().Type(gv.WithKind(k)); ok {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
