package action_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/engine"
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
	// A version published after the lock: plan keeps the locked one, says
	// what is newer, and --locked passes; with --update it would change the
	// lock, which --locked refuses naming the change.
	writePlugin(t, plugins, "lib", "1.1.0", `{}`)
	if msg := plan(true); msg != "" {
		t.Fatalf("plan --locked with a new version: %s", msg)
	}
	doc, l := action.NewPlan(&action.Config{NoBuiltin: true}).Run(ctx, load(t, file))
	if l.HasFatal() {
		t.Fatal(l)
	}
	var lib engine.PlanPlugin
	for _, p := range doc.Plugins {
		if p.Name == "lib" {
			lib = p
		}
	}
	if lib.Version != "1.0.0" || lib.Locked != "1.0.0" || lib.Newer != "1.1.0" || doc.Lock == nil || len(doc.Lock.Changes) != 0 {
		t.Fatalf("plan with a new version: lib %+v, lock %+v", lib, doc.Lock)
	}
	_, l = action.NewPlan(&action.Config{NoBuiltin: true, Locked: true, UpdateAll: true}).Run(ctx, load(t, file))
	if msg := l.String(); !strings.Contains(msg, "the lock file would change (--locked): lib 1.0.0") || !strings.Contains(msg, "would become 1.1.0") {
		t.Fatalf("plan --locked --update with a new version: %q", msg)
	}
	doc, l = action.NewPlan(&action.Config{NoBuiltin: true, Update: []string{"lib"}}).Run(ctx, load(t, file))
	if l.HasFatal() || doc.Plugins[0].Name != "lib" || doc.Plugins[0].Version != "1.1.0" || doc.Plugins[0].Newer != "" || len(doc.Lock.Changes) != 1 {
		t.Fatalf("plan --update lib: %+v %v", doc, l)
	}

	// A constraint the locked version no longer meets: the highest it admits.
	writePlugin(t, plugins, "lib", "2.0.0", `{}`)
	writePlugin(t, plugins, "app", "1.1.0", `{requires: [{name: lib, version: ">=2"}]}`)
	doc, l = action.NewPlan(&action.Config{NoBuiltin: true, Update: []string{"app"}}).Run(ctx, load(t, file))
	if l.HasFatal() || doc.Plugins[0].Version != "2.0.0" || doc.Plugins[1].Version != "1.1.0" {
		t.Fatalf("plan --update app, which requires a newer lib: %+v %v", doc, l)
	}
}
