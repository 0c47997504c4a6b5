package plugins_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/stage"
	"github.com/kubeplug/kubeplug/sdk/sdktest"
)

// TestQuickstartWithCodePlugins renders the quickstart with the two example plugins
// (exec and gRPC) and an in-process Go plugin enabled beside its own, and checks
// that each contributed to the rendered kube-apiserver.
func TestQuickstartWithCodePlugins(t *testing.T) {
	quickstart, err := os.ReadFile("../quickstart/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The plugins directory holds the quickstart's own plugin, the two examples
	// (grpc-go built and its digest pinned) and a plain manifest for the in-process one.
	plugins := filepath.Join(dir, "plugins")
	copyDir(t, "../quickstart/plugins", plugins)
	copyDir(t, "exec-shell", filepath.Join(plugins, "exec-shell"))
	copyDir(t, sdktest.Package(t, "grpc-go"), filepath.Join(plugins, "grpc-go"))
	writeFile(t, filepath.Join(plugins, "inproc", "plugin.yaml"), "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: inproc, version: 1.0.0}\nspec: {}\n")
	cluster := strings.Replace(string(quickstart), "    enabled:\n", "    enabled:\n      - name: exec-shell\n      - name: grpc-go\n      - name: inproc\n", 1)
	path := filepath.Join(dir, "cluster.yaml")
	writeFile(t, path, cluster)

	cfg := &action.Config{
		Env: func(string) (string, bool) { return "", false },
		InProcess: map[string]stage.Runtime{"inproc": stage.RuntimeFunc(func(_ context.Context, req *stage.Request) (*stage.Response, error) {
			if req.Stage != stage.Initialise {
				return nil, nil
			}
			return &stage.Response{Contribution: &model.Contribution{ControlPlane: &model.ControlPlane{
				Components: map[string]*model.Component{model.KubeAPIServer: {Flags: map[string]model.Setting[string]{"event-ttl": {Value: "2h"}}}},
			}}}, nil
		})},
	}
	cl, l := config.Load(path)
	if cl == nil {
		t.Fatal(l)
	}
	files, fl := action.NewRender(cfg).Files(t.Context(), cl)
	l = append(l, fl...)
	if l.HasFatal() {
		t.Fatal(l)
	}
	apiserver := string(files["control-plane/kube-apiserver.yaml"])
	for _, flag := range []string{"--audit-log-maxage=30", "--max-requests-inflight=800", "--event-ttl=2h", "--authorization-mode=Node,RBAC"} {
		if !strings.Contains(apiserver, flag) {
			t.Errorf("kube-apiserver.yaml lacks %s:\n%s", flag, apiserver)
		}
	}
	if _, ok := files["kubernetes/01-hello.yaml"]; !ok {
		t.Errorf("the quickstart's own plugin was not rendered; files: %v", keys(files))
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
