package kubeschema

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"
)

// Live returns the schemas a running cluster serves in its OpenAPI v3: every
// kind it knows, its CustomResourceDefinitions included. It asks the cluster
// for the list of group versions at the first Type and for each group
// version's schema the first time one of its kinds is asked for; an
// unreachable cluster is an error. ctx bounds every request.
func Live(ctx context.Context, cfg *rest.Config) (Source, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster at %s: %w", cfg.Host, err)
	}
	return &live{ctx: ctx, host: cfg.Host, client: dc.OpenAPIV3WithContext(ctx), byGV: map[schema.GroupVersion]Source{}}, nil
}

type live struct {
	ctx    context.Context
	host   string
	client openapi.ClientWithContext

	mu    sync.Mutex
	paths map[string]openapi.GroupVersionWithContext
	byGV  map[schema.GroupVersion]Source
}

func (l *live) Type(gvk schema.GroupVersionKind) (Type, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.paths == nil {
		paths, err := l.client.PathsWithContext(l.ctx)
		if err != nil {
			return Type{}, false, fmt.Errorf("reading the OpenAPI v3 schemas of the cluster at %s: %w", l.host, err)
		}
		l.paths = paths
	}
	gv := gvk.GroupVersion()
	src, seen := l.byGV[gv]
	if !seen {
		key := "apis/" + gv.Group + "/" + gv.Version
		if gv.Group == "" {
			key = "api/" + gv.Version
		}
		p, ok := l.paths[key]
		if ok {
			var err error
			src, err = l.load(p, key)
			if err != nil {
				return Type{}, false, err
			}
		}
		l.byGV[gv] = src
	}
	if src == nil {
		return Type{}, false, nil
	}
	return src.Type(gvk)
}

func (l *live) load(p openapi.GroupVersionWithContext, key string) (Source, error) {
	b, err := p.SchemaWithContext(l.ctx, "application/json")
	if err != nil {
		return nil, fmt.Errorf("reading the OpenAPI v3 schema %s of the cluster at %s: %w", key, l.host, err)
	}
	var doc spec3.OpenAPI
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("decoding the OpenAPI v3 schema %s of the cluster at %s: %w", key, l.host, err)
	}
	if doc.Components == nil || len(doc.Components.Schemas) == 0 {
		return nil, nil
	}
	tc, err := managedfields.NewTypeConverter(doc.Components.Schemas, false)
	if err != nil {
		return nil, fmt.Errorf("converting the OpenAPI v3 schema %s of the cluster at %s: %w", key, l.host, err)
	}
	return converterSource{tc: tc}, nil
}
