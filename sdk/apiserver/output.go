package apiserver

import (
	"context"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
)

// output is what a client asked to get back (its Accept header, negotiated
// with the API server's own code): the objects, a Table (kubectl get), or
// metadata only (the garbage collector, the namespace controller).
type output struct {
	as            string // "", "Table" or "PartialObjectMetadata"(+"List")
	includeObject metav1.IncludeObjectPolicy
}

var jsonOnly = func() []runtime.SerializerInfo {
	for _, info := range codecs.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON {
			return []runtime.SerializerInfo{info}
		}
	}
	panic("no JSON serializer")
}()

// conversions says which `as=` a client may ask for: meta.k8s.io/v1's Table
// and partial metadata, as the API server offers for every resource.
type conversions struct{}

func (conversions) AllowsMediaTypeTransform(_, _ string, gvk *schema.GroupVersionKind) bool {
	if gvk == nil {
		return true
	}
	if gvk.Group != metav1.GroupName || gvk.Version != "v1" {
		return false
	}
	switch gvk.Kind {
	case "Table", "PartialObjectMetadata", "PartialObjectMetadataList":
		return true
	}
	return false
}
func (conversions) AllowsServerVersion(string) bool  { return false }
func (conversions) AllowsStreamSchema(s string) bool { return s == "watch" }

// negotiate reads the Accept header; one it cannot meet gets the objects as
// JSON, the only encoding served.
func negotiate(r *http.Request) output {
	opts, ok := negotiation.NegotiateMediaTypeOptions(r.Header.Get("Accept"), jsonOnly, conversions{})
	if !ok || opts.Convert == nil {
		return output{}
	}
	out := output{as: opts.Convert.Kind, includeObject: metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject"))}
	return out
}

// convert turns an object or a list into what the client asked for.
func (o output) convert(ctx context.Context, k *kind, obj runtime.Object) (runtime.Object, error) {
	switch o.as {
	case "Table":
		switch obj.(type) {
		case *unstructured.Unstructured, *unstructured.UnstructuredList:
			return k.convertTable(ctx, obj, o.includeObject)
		}
	case "PartialObjectMetadata", "PartialObjectMetadataList":
		switch v := obj.(type) {
		case *unstructured.Unstructured:
			return partialMetadata(v), nil
		case *unstructured.UnstructuredList:
			l := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: "PartialObjectMetadataList"}}
			l.ResourceVersion, l.Continue, l.RemainingItemCount = v.GetResourceVersion(), v.GetContinue(), v.GetRemainingItemCount()
			for i := range v.Items {
				l.Items = append(l.Items, *partialMetadata(&v.Items[i]))
			}
			return l, nil
		}
	}
	return obj, nil
}
