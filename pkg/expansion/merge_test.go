package expansion_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/expansion"
)

// pack packs the expansion source at dir/src/NAME into dir/exp/NAME.tar.
func pack(t *testing.T, dir, name, manifest string) {
	t.Helper()
	writeFiles(t, filepath.Join(dir, "src", name), map[string]string{"expansion.yaml": manifest})
	if _, l := expansion.Create(context.Background(), filepath.Join(dir, "src", name), filepath.Join(dir, "exp", name+".tar"), expansion.CreateOptions{}); l.HasFatal() {
		t.Fatal(l)
	}
}

func TestMerge(t *testing.T) {
	head := func(name string) string {
		return "apiVersion: kubeplug.dev/v1alpha1\nkind: Expansion\nmetadata: {name: " + name + ", version: 1.0.0}\nspec:\n"
	}
	for _, tc := range []struct {
		name     string
		a, b     string
		want     string // an error, or "" for none
		enabled  string // the enabled plugins after the merge
		cpValues string // control-plane's values after the merge
		provider string
	}{
		{name: "overrides merge over the file's values and enable the plugins they name",
			a:       "  overrides:\n    plugins:\n      control-plane: {apiServer: {auditLog: true}}\n      extra: {x: 1}\n",
			b:       "  overrides:\n    plugins:\n      control-plane: {apiServer: {port: 6443}}\n  skipSteps: [plugin/metrics-server]\n",
			enabled: "control-plane,extra", cpValues: `{"apiServer":{"auditLog":true,"port":6443},"keep":"me"}`},
		{name: "two expansions set one value differently",
			a:    "  overrides:\n    plugins:\n      control-plane: {apiServer: {port: 6443}}\n",
			b:    "  overrides:\n    plugins:\n      control-plane: {apiServer: {port: 7443}}\n",
			want: `b.tar/expansion.yaml:7:41: spec.overrides.plugins.control-plane.apiServer.port: expansions a and b set plugin control-plane's value /apiServer/port differently \(6443 and 7443\): remove one`},
		{name: "provider overrides",
			a: "  overrides:\n    provider: {local: {realPools: [real]}}\n", b: "  skipSteps: [validate]\n",
			enabled: "control-plane,metrics-server", provider: `{"local":{"realPools":["real"]}}`},
		{name: "a provider override that does not fit",
			a: "  overrides:\n    provider: {nonesuch: {}}\n", b: "  skipSteps: [validate]\n",
			want: `a.tar/expansion.yaml:6:15: spec.overrides.provider: the provider overrides do not fit spec.provider`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pack(t, dir, "a", head("a")+tc.a)
			pack(t, dir, "b", head("b")+tc.b)
			set, l := expansion.Scan(context.Background(), expansion.UseOptions{Dirs: []string{filepath.Join(dir, "exp")}, WorkDir: t.TempDir()})
			if l.HasFatal() || len(set.Expansions) != 2 {
				t.Fatal(l)
			}
			c := &v1alpha1.Cluster{Spec: v1alpha1.ClusterSpec{Plugins: &v1alpha1.ClusterPlugins{Enabled: []v1alpha1.PluginRef{
				{Name: "control-plane", Values: v1alpha1.Values{"keep": "me"}}, {Name: "metrics-server"},
			}}}}
			ml := set.Merge(c)
			if tc.want != "" {
				if !matches(t, tc.want, ml.String()) {
					t.Fatalf("got %s\nwant /%s/", ml, tc.want)
				}
				return
			}
			if ml.HasFatal() {
				t.Fatal(ml)
			}
			var names []string
			for _, p := range c.Spec.Plugins.Enabled {
				names = append(names, p.Name)
				if p.Name == "control-plane" && tc.cpValues != "" && show(t, p.Values) != tc.cpValues {
					t.Errorf("control-plane values %s, want %s", show(t, p.Values), tc.cpValues)
				}
			}
			if got := strings.Join(names, ","); got != tc.enabled {
				t.Errorf("enabled %s, want %s", got, tc.enabled)
			}
			if tc.provider != "" && show(t, c.Spec.Provider) != tc.provider {
				t.Errorf("provider %s, want %s", show(t, c.Spec.Provider), tc.provider)
			}
		})
	}
	// Two expansions of one name are refused, naming both.
	dir := t.TempDir()
	pack(t, dir, "a", head("same")+"  skipSteps: [validate]\n")
	pack(t, dir, "b", head("same")+"  skipSteps: [validate]\n")
	if _, l := expansion.Scan(context.Background(), expansion.UseOptions{Dirs: []string{filepath.Join(dir, "exp")}, WorkDir: t.TempDir()}); !strings.Contains(l.String(), "b.tar: expansion same is also at "+filepath.Join(dir, "exp", "a.tar")) {
		t.Errorf("two of one name: %v", l)
	}
}
