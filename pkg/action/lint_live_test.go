package action_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestLintLive validates a plugin's objects against the OpenAPI v3 schemas of
// the real local control plane: a custom resource whose CRD only the cluster
// has (the plugin does not ship it) is checked with --live, and only noted as
// not validated offline; built-in kinds are checked either way.
func TestLintLive(t *testing.T) {
	cfg := testcluster.RESTConfig(t)
	crds, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "lintgadgets.lintlive.kubeplug.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "lintlive.kubeplug.dev",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "LintGadget", Plural: "lintgadgets"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"size": {Type: "integer"},
						}},
					},
				}},
			}},
		},
	}
	if _, err := crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = crds.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{})
	})

	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: gadgets, version: 0.1.0}
spec:
  contributes:
    kubernetes:
      manifests: [manifests/]
`,
		"manifests/gadget.yaml": `apiVersion: lintlive.kubeplug.dev/v1
kind: LintGadget
metadata: {name: g, namespace: default}
spec:
  size: big
  szie: 3
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: default}
dat: {a: b}
`,
	})

	// Offline: the gadget is not validated; the ConfigMap is.
	_, l := action.NewLint(&action.Config{NoBuiltin: true}).Run(ctx, dir)
	out := l.String()
	for _, want := range []string{
		`manifests/gadget.yaml:2:7: info: lintlive.kubeplug.dev/v1 LintGadget default/g not validated (no schema offline`,
		`manifests/gadget.yaml:11:1: dat: unknown field "dat"; did you mean "data"? (ConfigMap default/c)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("offline lint: no %q in\n%s", want, out)
		}
	}

	// Live: the cluster's schema of the gadget applies. The CRD's schema is
	// published to the OpenAPI v3 shortly after the CRD is created.
	lint := action.NewLint(&action.Config{NoBuiltin: true})
	lint.Target.RESTConfig = cfg
	wants := []string{
		`manifests/gadget.yaml:5:9: spec.size: expected a number, found the string "big" (LintGadget default/g)`,
		`manifests/gadget.yaml:6:3: spec.szie: unknown field "szie"; did you mean "size"? (LintGadget default/g)`,
		`manifests/gadget.yaml:11:1: dat: unknown field "dat"; did you mean "data"? (ConfigMap default/c)`,
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, l = lint.Run(ctx, dir)
		out = l.String()
		missing := ""
		for _, want := range wants {
			if !strings.Contains(out, want) {
				missing = want
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("live lint: no %q in\n%s", missing, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.Contains(out, "not validated") {
		t.Errorf("live lint left an object unvalidated:\n%s", out)
	}

	// An unreachable cluster is an error, not a silent offline run.
	bad := action.NewLint(&action.Config{NoBuiltin: true})
	bad.Target.RESTConfig = &rest.Config{Host: "https://127.0.0.1:1"}
	if _, l := bad.Run(ctx, dir); !strings.Contains(l.String(), "cannot validate against the cluster") || !l.HasFatal() {
		t.Errorf("lint against an unreachable cluster:\n%s", l)
	}
}
