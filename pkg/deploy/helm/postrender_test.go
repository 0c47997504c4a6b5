package helm_test

import (
	"bytes"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/postrenderer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/deploy/helm"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// replacer is a post-renderer that says what it does: it replaces "from the
// chart" with its word.
type replacer struct{ word string }

func (r replacer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	return bytes.NewBuffer(bytes.ReplaceAll(in.Bytes(), []byte("from the chart"), []byte(r.word))), nil
}

func (r replacer) Digest() string { return r.word }

// opaque is a post-renderer that cannot say what it does.
type opaque struct{ word string }

func (o opaque) Run(in *bytes.Buffer) (*bytes.Buffer, error) { return replacer(o).Run(in) }

var (
	_ helm.PostRenderDigester   = replacer{}
	_ postrenderer.PostRenderer = opaque{}
)

// TestPostRendererChangeUpgrades: with the chart and values as they were, a
// post-renderer that comes, changes or goes upgrades the release (an
// expansion's site-registry rewrite of a chart's images is one, and removing
// the expansion must give the chart's own images back); the same one leaves
// it alone; one that cannot say what it does always upgrades.
func TestPostRendererChangeUpgrades(t *testing.T) {
	ns := testcluster.Namespace(t)
	cs := testcluster.Client(t)
	ctx := t.Context()
	chart, err := loader.LoadFiles([]*archive.BufferedFile{
		{Name: "Chart.yaml", Data: []byte("apiVersion: v2\nname: msg\nversion: 0.1.0\n")},
		{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: msg}\ndata: {message: from the chart}\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	install := func(pr postrenderer.PostRenderer, wantRevision int, wantMessage string) {
		t.Helper()
		m, sensitive := manager(t, ns) // each install is another kubeplug run
		if r, ok := pr.(replacer); ok && strings.HasPrefix(r.word, "sealed") {
			sensitive.Add(r.word) // the record is sealed: its labels must stay
		}
		done, err := m.Install(ctx, "msg", helm.Release{Name: "msg", Namespace: ns, Chart: chart, PostRenderer: pr})
		if err != nil {
			t.Fatal(err)
		}
		if done.Revision() != wantRevision {
			t.Errorf("revision %d, want %d", done.Revision(), wantRevision)
		}
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "msg", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data["message"] != wantMessage {
			t.Errorf("message %q, want %q", cm.Data["message"], wantMessage)
		}
	}
	install(nil, 1, "from the chart")
	install(replacer{"site"}, 2, "site")                 // comes
	install(replacer{"site"}, 2, "site")                 // the same: no upgrade
	install(replacer{"another site"}, 3, "another site") // changes
	install(nil, 4, "from the chart")                    // goes
	install(nil, 4, "from the chart")
	install(opaque{"opaque"}, 5, "opaque")
	install(opaque{"opaque"}, 6, "opaque")
	install(replacer{"sealed site password"}, 7, "sealed site password")
	install(replacer{"sealed site password"}, 7, "sealed site password")
}
