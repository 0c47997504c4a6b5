package plugins_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/serving"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// TestDeploymentPolicyExample renders the deployment-policy example and checks
// that what kubeplug generates for its webhooks fits the manifests the author
// wrote: the Deployment mounts the certificate Secret kubeplug fills, and each
// webhook points at the Service and a path the server serves. The server
// builds; test/e2e/served runs it behind the generated configurations.
func TestDeploymentPolicyExample(t *testing.T) {
	r := action.NewRender(&action.Config{NoBuiltin: true})
	r.Stage = stage.Initialise
	cl, l := config.Load(clusterFile(t, "deployment-policy", "deployment-policy", ""))
	if cl == nil {
		t.Fatal(l)
	}
	files, fl := r.Files(t.Context(), cl)
	if l = append(l, fl...); l.HasFatal() {
		t.Fatal(l)
	}
	var m model.Model
	if err := json.Unmarshal(files["model.json"], &m); err != nil {
		t.Fatal(err)
	}
	byKey := map[string]map[string]any{}
	for _, o := range m.Kubernetes.Objects {
		byKey[model.ObjectKey(o.Object)] = o.Object
	}
	for key, path := range map[string]string{
		"admissionregistration.k8s.io/ValidatingWebhookConfiguration kubeplug-deployment-policy": "/validate",
		"admissionregistration.k8s.io/MutatingWebhookConfiguration kubeplug-deployment-policy":   "/mutate",
	} {
		b, _ := json.Marshal(byKey[key])
		for _, want := range []string{`"path":"` + path + `"`, `"name":"deployment-policy","namespace":"deployment-policy-system"`, `"failurePolicy":"Ignore"`, `"deployment-policy-system"`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s does not have %s: %s", key, want, b)
			}
		}
	}
	if byKey["core/Secret deployment-policy-system/"+serving.CertSecretName("deployment-policy")] == nil {
		t.Error("render has no serving certificate Secret")
	}
	dep, _ := json.Marshal(byKey["apps/Deployment deployment-policy-system/deployment-policy"])
	if want := `"secretName":"` + serving.CertSecretName("deployment-policy") + `"`; !strings.Contains(string(dep), want) {
		t.Errorf("the Deployment does not mount %s: %s", want, dep)
	}
	out, err := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "server"), "./deployment-policy/server").CombinedOutput()
	if err != nil {
		t.Fatalf("the example server does not build: %v\n%s", err, out)
	}
}
