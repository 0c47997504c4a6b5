package apiserver

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
)

// openAPI publishes the group version's OpenAPI v3 as the API server's own
// code builds it for CustomResourceDefinitions: the kube-apiserver's
// aggregator fetches /openapi/v3 and serves it with the rest, so kubectl
// validates (server-side, with fieldValidation) and explains these kinds.
func openAPI(group, version string, kinds []*kind) (*handler3.OpenAPIService, error) {
	var specs []*spec3.OpenAPI
	for _, k := range kinds {
		sp, err := builder.BuildOpenAPIV3(k.crd, version, builder.Options{V2: false, IncludeSelectableFields: true})
		if err != nil {
			return nil, fmt.Errorf("apiserver: OpenAPI of %s: %w", k.res.Plural, err)
		}
		specs = append(specs, sp)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		return nil, fmt.Errorf("apiserver: OpenAPI: %w", err)
	}
	svc := handler3.NewOpenAPIService()
	svc.UpdateGroupVersion("apis/"+group+"/"+version, merged)
	return svc, nil
}
