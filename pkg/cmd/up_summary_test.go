package cmd

import (
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// TestUpSummaryLessTested: up's summary marks the contrib plugins the cluster
// runs as less tested, and says nothing of the kind without them.
func TestUpSummaryLessTested(t *testing.T) {
	res := &action.UpResult{Cluster: "c", StateDir: "/state",
		Versions: map[string]string{"audit-logging": "0.1.0", "control-plane": "1.4.0"}, LessTested: []string{"audit-logging"}}
	var b strings.Builder
	printUpSummary(&b, res, false, "cluster.yaml")
	const want = "\nless tested: audit-logging (contrib: contributed plugins are tested less than the built-in ones)\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("summary without %q:\n%s", want, b.String())
	}
	res.LessTested = nil
	b.Reset()
	printUpSummary(&b, res, false, "cluster.yaml")
	if strings.Contains(b.String(), "less tested") {
		t.Errorf("summary of built-in plugins marks one as less tested:\n%s", b.String())
	}
}
