package action_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/lock"
)

// TestLock writes a lock file, checks --locked against it, refuses a locked version
// whose package changed (naming both digests), and sees a new version as a change.
func TestLock(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	plugins := filepath.Join(work, "plugins")
	lib := writePlugin(t, plugins, "lib", "1.0.0", `{}`)
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
	cfg := &action.Config{NoBuiltin: true}
	run := func(locked bool) (*action.LockResult, string) {
		a := action.NewLock(cfg)
		a.Locked = locked
		res, l := a.Run(ctx, load(t, file))
		return res, l.String()
	}
	if res, msg := run(true); res != nil || !strings.Contains(msg, "would change (--locked): no lock file yet") {
		t.Fatalf("--locked without a lock file: %v %s", res, msg)
	}
	res, msg := run(false)
	if res == nil {
		t.Fatal(msg)
	}
	lf, err := lock.Read(filepath.Join(work, lock.FileName))
	if err != nil || lf == nil || len(lf.Plugins) != 2 || lf.Plugins[0].Name != "app" || lf.Plugins[1].Name != "lib" || lf.Plugins[1].Source != "user" || !strings.HasPrefix(lf.Plugins[1].Digest, "sha256:") {
		t.Fatalf("lock file: %+v %v", lf, err)
	}
	if res, msg := run(true); res == nil || len(res.Changes) != 0 {
		t.Fatalf("--locked with an up-to-date lock: %v %s", res, msg)
	}

	// The same version, other content: refused by plan, naming both digests.
	if err := os.WriteFile(filepath.Join(lib, "NOTES.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, l := action.NewPlan(cfg).Run(ctx, load(t, file))
	if !l.HasFatal() || !strings.Contains(l.String(), "plugin lib@1.0.0 has digest sha256:") || !strings.Contains(l.String(), "but kubeplug.lock pins "+lf.Plugins[1].Digest) {
		t.Fatalf("plan with a changed locked package: %v", l)
	}
	if err := os.Remove(filepath.Join(lib, "NOTES.txt")); err != nil {
		t.Fatal(err)
	}

	// A new version: the lock holds lib at 1.0.0, saying what is newer;
	// --update lib takes it.
	writePlugin(t, plugins, "lib", "1.1.0", `{}`)
	if res, msg := run(true); res == nil || len(res.Changes) != 0 || !slices.Equal(res.Newer, []string{"lib 1.1.0"}) {
		t.Fatalf("--locked with a new version: %+v %s", res, msg)
	}
	if res, msg := run(false); res == nil || len(res.Changes) != 0 {
		t.Fatalf("relock with a new version: %+v %s", res, msg)
	}
	a := action.NewLock(cfg)
	a.Update = []string{"lib"}
	res, l = a.Run(ctx, load(t, file))
	if res == nil || len(res.Changes) != 1 || !strings.Contains(res.Changes[0], "lib 1.0.0 (user, "+lf.Plugins[1].Digest+") would become 1.1.0") || len(res.Newer) != 0 {
		t.Fatalf("lock --update lib: %+v %v", res, l)
	}
	if lf, err := lock.Read(filepath.Join(work, lock.FileName)); err != nil || lf.Plugins[1].Version != "1.1.0" {
		t.Fatalf("lock file after --update lib: %+v %v", lf, err)
	}

	// Naming a plugin neither the lock nor the plan has is an error.
	a = action.NewLock(cfg)
	a.Update = []string{"lbi"}
	if _, l := a.Run(ctx, load(t, file)); !l.HasFatal() || !strings.Contains(l.String(), "--update lbi: neither kubeplug.lock nor the cluster's plan has plugin lbi; did you mean \"lib\"?") {
		t.Fatalf("lock --update of an unknown plugin: %v", l)
	}
}
