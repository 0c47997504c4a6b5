// Package failing_test keeps the deliberately failing example honest: each of its
// two cluster files must pass validation and render, and then fail for the reason
// its README promises, and pass once the fix it names is applied. (`kubeplug up`
// of both is in the end-to-end tests; these run the failing parts on their own.)
package failing_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
	"github.com/kubeplug/kubeplug/test/harness/testmachine"
)

// render renders the example's cluster file with env as the only environment.
func render(t *testing.T, file string, env map[string]string) map[string][]byte {
	t.Helper()
	cfg := &action.Config{Env: func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}}
	cl, l := config.Load(file)
	if cl == nil {
		t.Fatal(l)
	}
	files, fl := action.NewRender(cfg).Files(context.Background(), cl)
	l = append(l, fl...)
	if l.HasFatal() {
		t.Fatalf("render %s:\n%s", file, l)
	}
	return files
}

// TestHookVariant runs cluster-hook.yaml's workers through beforeNodeup: without
// SITE_CA_BUNDLE the enforced site-ca hook fails the node, naming the hook, the
// node and the value to set; with the demo CA the node may join.
func TestHookVariant(t *testing.T) {
	ca, err := os.ReadFile("site-ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		fail bool
	}{
		{name: "unset", fail: true},
		{name: "fixed", env: map[string]string{"SITE_CA_BUNDLE": string(ca)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := testmachine.FromCloudInit(t, render(t, "cluster-hook.yaml", tc.env), "workers", t.TempDir())
			agent, err := nodeagent.New(nodeagent.Options{Root: root, Node: hookspec.Node{Name: "workers-1"}})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := agent.Run(context.Background(), hookspec.PhaseBeforeNodeup)
			if rep == nil || len(rep.Hooks) != 1 {
				t.Fatalf("want a report of the one site-ca hook, got %+v, %v", rep, err)
			}
			res := rep.Hooks[0]
			trusted := filepath.Join(root, "usr/local/share/ca-certificates/site-ca.crt")
			if tc.fail {
				var he *nodeagent.HookError
				if !errors.As(err, &he) || he.Plugin != "site-ca" || he.Hook != "trust-site-ca" || he.Node != "workers-1" {
					t.Fatalf("want a *HookError for site-ca/trust-site-ca on workers-1, got %v", err)
				}
				if !rep.Failed || !strings.Contains(res.Stderr, "node workers-1 does not trust the site CA") || !strings.Contains(res.Stderr, "set caBundle") {
					t.Fatalf("want the node failed with the reason and the fix, got failed=%v stderr %q", rep.Failed, res.Stderr)
				}
				if _, err := os.Stat(trusted); err == nil {
					t.Errorf("a failed hook left %s behind", trusted)
				}
				return
			}
			if err != nil || res.Status != nodeagent.StatusSucceeded {
				t.Fatalf("hook %s: %v; stderr %q", res.Status, err, res.Stderr)
			}
			got, err := os.ReadFile(trusted)
			if err != nil || string(got) != string(ca) {
				t.Fatalf("the node does not trust the demo CA at %s: %v", trusted, err)
			}
		})
	}
}

// TestCheckVariant evaluates the payments plugin's validate expression over the
// ConfigMap cluster.yaml renders (false: the example fails at validate) and over
// the one the fix renders (true).
func TestCheckVariant(t *testing.T) {
	b, err := os.ReadFile("plugins/payments/plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var p v1alpha1.Plugin
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.Validate) != 1 || p.Spec.Validate[0].Expression == nil {
		t.Fatalf("want one expression check in payments, got %+v", p.Spec.Validate)
	}
	check := p.Spec.Validate[0].Expression
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(check.Expression)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}

	orig, err := os.ReadFile("cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fixed := filepath.Join(t.TempDir(), "cluster.yaml")
	body := strings.Replace(string(orig), "mode: staging\n", "mode: production\n", 1)
	body = strings.Replace(body, "dir: ./plugins", "dir: "+must(filepath.Abs("plugins")), 1)
	if err := os.WriteFile(fixed, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		pass bool
	}{{"cluster.yaml", false}, {fixed, true}} {
		var manifests string
		for name, b := range render(t, tc.file, nil) {
			if strings.HasPrefix(name, "kubernetes/") && strings.HasSuffix(name, "-payments.yaml") {
				manifests = string(b)
			}
		}
		var obj map[string]any
		for _, doc := range strings.Split(manifests, "\n---\n") {
			var o map[string]any
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatal(err)
			}
			if o["kind"] == check.Kind && o["metadata"].(map[string]any)["name"] == check.Name {
				obj = o
			}
		}
		if obj == nil {
			t.Fatalf("%s renders no %s %s/%s", tc.file, check.Kind, check.Namespace, check.Name)
		}
		out, _, err := prg.Eval(map[string]any{"object": obj})
		if err != nil {
			t.Fatal(err)
		}
		if out.Value() != tc.pass {
			t.Errorf("%s: the check %q is %v, want %v", tc.file, check.Expression, out.Value(), tc.pass)
		}
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
