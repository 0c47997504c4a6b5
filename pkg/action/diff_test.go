package action_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// TestDiffRefusesADirectoryRenderDidNotWrite: diff --against prints the files it
// compares with, so it only reads a directory that holds render's marker.
func TestDiffRefusesADirectoryRenderDidNotWrite(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "id_rsa"), []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	cl, l := config.Load("../../examples/quickstart/cluster.yaml")
	if cl == nil {
		t.Fatal(l)
	}
	out, l := action.NewDiff(&action.Config{Env: func(string) (string, bool) { return "", false }}).Run(t.Context(), cl, dir)
	if !l.HasFatal() || !strings.Contains(l.String(), render.MarkerFile) || strings.Contains(out+l.String(), "PRIVATE KEY") {
		t.Errorf("output %q, diagnostics:\n%s", out, l)
	}
}
