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

// TestWidgetsAPIExample renders the widgets-api example and checks that what
// kubeplug generates for its served API fits the manifests the author wrote:
// the Deployment mounts the certificate Secret kubeplug fills, runs as the
// ServiceAccount the delegation RBAC binds, and the APIService points at the
// Service. The server itself builds; test/e2e/served runs the same SDK server
// behind a generated APIService.
func TestWidgetsAPIExample(t *testing.T) {
	r := action.NewRender(&action.Config{NoBuiltin: true})
	r.Stage = stage.Initialise
	cl, l := config.Load(clusterFile(t, "widgets-api", "widgets-api", ""))
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
	for _, key := range []string{
		"apiregistration.k8s.io/APIService v1alpha1.widgets.example.com",
		"core/Secret widgets-system/" + serving.CertSecretName("widgets-api"),
		"core/Secret widgets-system/" + serving.CASecretName("widgets-api"),
		"rbac.authorization.k8s.io/ClusterRoleBinding kubeplug:widgets-api:widgets-system:widgets-api:auth-delegator",
		"rbac.authorization.k8s.io/RoleBinding kube-system/kubeplug:widgets-api:widgets-system:widgets-api:auth-reader",
	} {
		if byKey[key] == nil {
			t.Errorf("render has no %s", key)
		}
	}
	dep, _ := json.Marshal(byKey["apps/Deployment widgets-system/widgets-api"])
	for _, want := range []string{`"secretName":"` + serving.CertSecretName("widgets-api") + `"`, `"serviceAccountName":"widgets-api"`} {
		if !strings.Contains(string(dep), want) {
			t.Errorf("the Deployment does not have %s: %s", want, dep)
		}
	}
	if byKey["core/Service widgets-system/widgets-api"] == nil {
		t.Error("the APIService's Service is not in the plugin")
	}
	out, err := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "server"), "./widgets-api/server").CombinedOutput()
	if err != nil {
		t.Fatalf("the example server does not build: %v\n%s", err, out)
	}
}
