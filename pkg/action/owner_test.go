package action_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestOwnersNeverFight: plugins a PluginInstallation manages (Owner set) are
// neither changed, removed nor uninstalled by the CLI (no owner), and the CLI's
// apply removes only its own plugins; the owner takes over what the CLI
// installed only when it says so (Adopt).
func TestOwnersNeverFight(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		writeTree(t, dir, map[string]string{name: text})
	}
	for _, p := range []string{"owned-a", "owned-b"} {
		write("plugins/"+p+"/plugin.yaml", "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: "+p+", version: 1.0.0}\nspec:\n  contributes:\n    kubernetes: {manifests: [cm.yaml]}\n")
		write("plugins/"+p+"/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+p+"-owner-test, namespace: default}\n")
	}
	file := func(name string, plugins ...string) string {
		var enabled []string
		for _, p := range plugins {
			enabled = append(enabled, "{name: "+p+"}")
		}
		write(name, "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: owners}\nspec:\n  kubernetesVersion: 1.37.1\n  provider: {local: {}}\n  plugins:\n    sources: [{dir: ./plugins}]\n    enabled: ["+strings.Join(enabled, ", ")+"]\n")
		return filepath.Join(dir, name)
	}
	cfg := &action.Config{NoBuiltin: true, Env: func(string) (string, bool) { return "", false }}
	rc := testcluster.RESTConfig(t)
	apply := func(owner, path string, adopt ...bool) (*action.ApplyResult, string) {
		a := action.NewApply(cfg)
		a.Target.RESTConfig = rc
		a.Timeout = time.Minute
		a.Owner = owner
		a.Adopt = len(adopt) > 0 && adopt[0]
		res, l := a.Run(t.Context(), load(t, path))
		if l.HasFatal() {
			return nil, l.String()
		}
		return res, ""
	}
	t.Cleanup(func() {
		for _, owner := range []string{"", "team/one"} {
			d := action.NewUninstall(cfg)
			d.Target.RESTConfig = rc
			d.Owner = owner
			_, _ = d.Run(context.WithoutCancel(t.Context()), "owned-a", "owned-b")
		}
	})

	if _, err := apply("team/one", file("a.yaml", "owned-a")); err != "" {
		t.Fatal(err)
	}
	// The CLI cannot change it...
	if _, err := apply("", file("cli-a.yaml", "owned-a")); !strings.Contains(err, "plugin owned-a is managed by PluginInstallation team/one") {
		t.Errorf("CLI apply of an owned plugin: %q", err)
	}
	// ...nor remove it by leaving it out, nor uninstall it.
	res, err := apply("", file("cli-b.yaml", "owned-b"))
	if err != "" || slices.Contains(res.Removed, "owned-a") {
		t.Errorf("CLI apply without the owned plugin: removed %v, %q", res, err)
	}
	u := action.NewUninstall(cfg)
	u.Target.RESTConfig = rc
	if _, l := u.Run(t.Context(), "owned-a"); !strings.Contains(l.String(), "managed by PluginInstallation team/one") {
		t.Errorf("CLI uninstall of an owned plugin: %v", l)
	}
	// The owner does not take the CLI's plugin silently...
	if _, err := apply("team/one", file("both.yaml", "owned-a", "owned-b")); !strings.Contains(err, "plugin owned-b is managed by the CLI") {
		t.Errorf("owner apply of the CLI's plugin without Adopt: %q", err)
	}
	// ...but adopts it when told, and removes only its own when it leaves
	// them out.
	if _, err := apply("team/one", file("both.yaml", "owned-a", "owned-b"), true); err != "" {
		t.Fatal(err)
	}
	if res, err := apply("team/one", file("b.yaml", "owned-b")); err != "" || !slices.Equal(res.Removed, []string{"owned-a"}) {
		t.Errorf("owner apply without owned-a: removed %v, %q", res, err)
	}
}
