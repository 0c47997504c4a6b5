package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/cmd"
)

// outputCommands are the commands whose -o json and -o yaml output is under
// golden review (docs/output.md documents it): a change of a field name or
// shape shows up as a diff of testdata/golden/output. Commands that need a
// running cluster are covered by test/e2e/cluster. $REPO and $TMP stand for
// the checkout and the test's directory.
var outputCommands = []struct {
	name string
	args []string
}{
	{"version", []string{"version"}},
	{"plugin-list", []string{"plugin", "list", "-f", "$REPO/examples/quickstart/cluster.yaml"}},
	{"plugin-show", []string{"plugin", "show", "hello", "-f", "$REPO/examples/quickstart/cluster.yaml"}},
	{"plugin-lint", []string{"plugin", "lint", "$REPO/examples/quickstart/plugins/hello"}},
	{"config-validate", []string{"config", "validate", "-f", "$REPO/examples/quickstart/cluster.yaml"}},
	{"plan", []string{"plan", "-f", "$REPO/examples/quickstart/cluster.yaml"}},
	{"plan-upgrade", []string{"plan", "-f", "$REPO/examples/quickstart/cluster.yaml", "--kubernetes-version", "1.37.1"}},
	{"render-initialise", []string{"render", "--stage", "initialise", "-f", "$REPO/examples/quickstart/cluster.yaml"}},
	{"diff-against", []string{"diff", "-f", "$REPO/examples/quickstart/cluster.yaml", "--against", "$TMP/render"}},
}

// Regenerate with: go test ./test/e2e -run TestOutputGolden -update
func TestOutputGolden(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBEPLUG_CONTRIB_DIR", filepath.Join(repo, "contrib", "plugins"))
	tmp := t.TempDir()
	// A previous render that differs from today's in one changed and one removed file.
	render := filepath.Join(tmp, "render")
	if code := cmd.Main(context.Background(), []string{"render", "-f", filepath.Join(repo, "examples/quickstart/cluster.yaml"), "--output-dir", render}, cmd.Streams{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}); code != 0 {
		t.Fatalf("render: exit %d", code)
	}
	if err := os.WriteFile(filepath.Join(render, "plan.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(render, "removed.yaml"), []byte("gone: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	expand := strings.NewReplacer("$REPO", repo, "$TMP", tmp)
	hide := strings.NewReplacer(tmp, "$TMP", repo, "$REPO")
	for _, c := range outputCommands {
		for _, format := range []string{"json", "yaml"} {
			t.Run(c.name+"."+format, func(t *testing.T) {
				args := make([]string, 0, len(c.args)+2)
				for _, a := range c.args {
					args = append(args, expand.Replace(a))
				}
				args = append(args, "-o", format)
				var out, errb bytes.Buffer
				code := cmd.Main(context.Background(), args, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
				if differs := c.name == "diff-against" && code == 2; code != 0 && !differs {
					t.Fatalf("kubeplug %s: exit %d\n%s", strings.Join(c.args, " "), code, errb.String())
				}
				got := hide.Replace(out.String())
				if c.name == "version" { // the toolchain's, not kubeplug's
					got = strings.NewReplacer(runtime.Version(), "$GOVERSION", runtime.GOOS+"/"+runtime.GOARCH, "$PLATFORM").Replace(got)
				}
				file := filepath.Join("testdata", "golden", "output", c.name+"."+format)
				if *update {
					if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("read golden (run with -update to create it): %v", err)
				}
				if got != string(want) {
					t.Errorf("kubeplug %s -o %s differs from %s:\n%s", strings.Join(c.args, " "), format, file, got)
				}
			})
		}
	}
}
