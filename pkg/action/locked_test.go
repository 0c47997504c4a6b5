package action_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// TestPlanLocked checks plan --locked (the check render, apply and up share): refused
// without a lock file, accepted with an up-to-date one, refused naming the change
// when a new version would replace a locked one.
func TestPlanLocked(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	plugins := filepath.Join(work, "plugins")
	writePlugin(t, plugins, "lib", "1.0.0", `{}`)
	writePlugin(t, plugins, "app", "1.0.0", `{requires: [{name: lib}]}`)
	file := filepath.Join(work, "cluster.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: locked}
spec:
  kubernetesVersion: 1.33.0
  provider: {local: {}}
  plugins:
    sources:
      - dir: ./plugins
    enabled:
      - name: app
`), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := func(locked bool) string {
		_, l := action.NewPlan(&action.Config{NoBuiltin: true, Locked: locked}).Run(ctx, load(t, file))
		if !l.HasFatal() {
			return ""
		}
		return l.String()
	}
	if msg := plan(true); !strings.Contains(msg, "--locked: there is no lock file") {
		t.Fatalf("plan --locked without a lock file: %q", msg)
	}
	if _, l := action.NewLock(&action.Config{NoBuiltin: true}).Run(ctx, load(t, file)); l.HasFatal() {
		t.Fatal(l)
	}
	if msg := plan(true); msg != "" {
		t.Fatalf("plan --locked with an up-to-date lock: %s", msg)
	}
	writePlugin(t, plugins, "lib", "1.1.0", `{}`)
	if msg := plan(true); !strings.Contains(msg, "the lock file would change (--locked): lib 1.0.0") || !strings.Contains(msg, "would become 1.1.0") {
		t.Fatalf("plan --locked with a new version: %q", msg)
	}
	if msg := plan(false); msg != "" {
		t.Fatalf("plan without --locked: %s", msg)
	}
}
