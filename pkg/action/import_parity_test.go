package action_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// TestImportHelmMatchesHelmTemplate: the plugin `kubeplug import helm` makes
// of a real chart (podinfo, testdata/import/helm) renders the objects `helm
// template` renders for the same chart, release and namespace, but for the
// differences written in testdata/import/helm/golden/parity.golden — the
// round-trip proof of the Helm importer.
func TestImportHelmMatchesHelmTemplate(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	chart, err := filepath.Abs("../../testdata/import/helm/podinfo")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	imp := action.NewImport(&action.Config{NoBuiltin: true})
	imp.Dir = filepath.Join(work, "plugins")
	res, l := imp.Run(context.Background(), action.ImportHelm, chart)
	if l.HasFatal() || res == nil || len(res.Plugins) != 1 {
		t.Fatalf("import helm: %v %+v", l, res)
	}
	name := res.Plugins[0].Name
	file := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: parity}
spec:
  kubernetesVersion: %s
  provider: {local: {}}
  plugins:
    sources: [{dir: ./plugins}]
    enabled: [{name: %s}]
`, parityVersion, name), 0o644); err != nil {
		t.Fatal(err)
	}
	rendered, l := action.NewRender(&action.Config{NoBuiltin: true}).Files(context.Background(), load(t, file))
	if l.HasFatal() {
		t.Fatalf("kubeplug render of the imported plugin: %v", l)
	}
	ours := map[string]object{}
	for n, b := range rendered {
		if !strings.HasPrefix(n, "kubernetes/") {
			continue
		}
		for doc := range strings.SplitSeq(string(b), "\n---\n") {
			hook := ""
			if strings.Contains(doc, ", hook ") {
				hook = "hook"
			}
			addObject(t, ours, doc, hook)
		}
	}
	// The importer installs the chart as release NAME in namespace NAME.
	helm := helmTemplate(t, chart, name, name, nil, "{}")
	var report bytes.Buffer
	for _, line := range compareObjects(helm, ours) {
		fmt.Fprintln(&report, line)
	}
	checkParityGolden(t, "../../testdata/import/helm/golden/parity.golden", report.Bytes())
}
