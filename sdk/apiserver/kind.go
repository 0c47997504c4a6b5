package apiserver

import (
	"context"
	"fmt"
	"strings"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
)

// kind is what the server makes of a Resource: the CustomResourceDefinition
// it would be, and from it what the apiextensions-apiserver's own code gives
// a custom resource — its OpenAPI, its Table, pruning, defaulting and schema
// validation — so that a served kind behaves as a CRD's does.
type kind struct {
	res        Resource
	gvk        schema.GroupVersionKind
	crd        *apiextensionsv1.CustomResourceDefinition
	structural *structuralschema.Structural // nil: no schema declared
	validator  apiextensionsvalidation.SchemaValidator
	table      rest.TableConvertor
	fields     *fieldManagers
}

// preserveUnknown is the schema of a Resource that declares none: any object.
var preserveUnknown = &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}

func ptrTo[T any](v T) *T { return &v }

func newKind(group, version string, res Resource) (*kind, error) {
	k := &kind{res: res, gvk: schema.GroupVersionKind{Group: group, Version: version, Kind: res.Kind}}
	scope := apiextensionsv1.ClusterScoped
	if res.Namespaced {
		scope = apiextensionsv1.NamespaceScoped
	}
	v := apiextensionsv1.CustomResourceDefinitionVersion{
		Name: version, Served: true, Storage: true,
		Schema:                   &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: res.Schema},
		AdditionalPrinterColumns: res.Columns,
	}
	if res.Schema == nil {
		v.Schema.OpenAPIV3Schema = preserveUnknown
	}
	if len(v.AdditionalPrinterColumns) == 0 {
		// A CRD's default columns.
		v.AdditionalPrinterColumns = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}}
	}
	if res.Status {
		v.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	}
	for _, f := range res.SelectableFields {
		v.SelectableFields = append(v.SelectableFields, apiextensionsv1.SelectableField{JSONPath: f})
	}
	k.crd = &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: res.Plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: scope, Versions: []apiextensionsv1.CustomResourceDefinitionVersion{v},
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: res.Plural, Singular: strings.ToLower(res.Kind), Kind: res.Kind, ListKind: res.Kind + "List",
			},
		},
	}
	var err error
	if k.table, err = tableconvertor.New(v.AdditionalPrinterColumns); err != nil {
		return nil, fmt.Errorf("apiserver: resource %s: Columns: %w", res.Plural, err)
	}
	if k.fields, err = newFieldManagers(k); err != nil {
		return nil, err
	}
	if res.Schema == nil {
		return k, nil
	}
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(res.Schema, internal, nil); err != nil {
		return nil, fmt.Errorf("apiserver: resource %s: Schema: %w", res.Plural, err)
	}
	if k.structural, err = structuralschema.NewStructural(internal); err != nil {
		return nil, fmt.Errorf("apiserver: resource %s: Schema: %w", res.Plural, err)
	}
	if errs := structuralschema.ValidateStructural(field.NewPath("Schema"), k.structural); len(errs) > 0 {
		return nil, fmt.Errorf("apiserver: resource %s: the schema is not structural (as a CRD's must be): %w", res.Plural, errs.ToAggregate())
	}
	if k.validator, _, err = apiextensionsvalidation.NewSchemaValidator(internal); err != nil {
		return nil, fmt.Errorf("apiserver: resource %s: Schema: %w", res.Plural, err)
	}
	return k, nil
}

// admit prepares an object written by a client as the API server does a
// custom resource's: fields the schema does not know are pruned (and with
// fieldValidation=Strict refused, with Warn reported as warnings), defaults
// are set and the schema is checked. It returns the warnings.
func (k *kind) admit(u *unstructured.Unstructured, fieldValidation string) ([]string, error) {
	if k.structural == nil {
		return nil, nil
	}
	unknown := pruning.PruneWithOptions(u.Object, k.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: fieldValidation != metav1.FieldValidationIgnore})
	var warnings []string
	for _, p := range unknown {
		msg := fmt.Sprintf("unknown field %q", p)
		if fieldValidation == metav1.FieldValidationStrict {
			return nil, apierrors.NewBadRequest("strict decoding error: " + msg)
		}
		warnings = append(warnings, msg)
	}
	structuraldefaulting.Default(u.Object, k.structural)
	if errs := apiextensionsvalidation.ValidateCustomResource(nil, u.Object, k.validator); len(errs) > 0 {
		return nil, apierrors.NewInvalid(k.gvk.GroupKind(), u.GetName(), errs)
	}
	return warnings, nil
}

// convertTable is the Table of an object or a list for kubectl get.
func (k *kind) convertTable(ctx context.Context, obj any, includeObject metav1.IncludeObjectPolicy) (*metav1.Table, error) {
	var t *metav1.Table
	var err error
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		t, err = k.table.ConvertToTable(ctx, o, nil)
	case *unstructured.UnstructuredList:
		t, err = k.table.ConvertToTable(ctx, o, nil)
	default:
		return nil, fmt.Errorf("no table for %T", obj)
	}
	if err != nil {
		return nil, err
	}
	for i := range t.Rows {
		u, ok := t.Rows[i].Object.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		switch includeObject {
		case metav1.IncludeObject:
		case metav1.IncludeNone:
			t.Rows[i].Object.Object = nil
		default:
			t.Rows[i].Object.Object = partialMetadata(u)
		}
	}
	t.APIVersion, t.Kind = metav1.SchemeGroupVersion.String(), "Table"
	return t, nil
}

// partialMetadata is an object's metadata only, as metadata-only clients (the
// garbage collector, the namespace controller) ask for.
func partialMetadata(u *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: metav1.SchemeGroupVersion.String(), Kind: "PartialObjectMetadata"}}
	m.ObjectMeta = metav1.ObjectMeta{
		Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
		Generation: u.GetGeneration(), CreationTimestamp: u.GetCreationTimestamp(), DeletionTimestamp: u.GetDeletionTimestamp(),
		Labels: u.GetLabels(), Annotations: u.GetAnnotations(), OwnerReferences: u.GetOwnerReferences(),
		Finalizers: u.GetFinalizers(), ManagedFields: u.GetManagedFields(),
	}
	return m
}
