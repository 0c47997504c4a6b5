package controlplane

import (
	"os"
	"regexp"
	"runtime/debug"
	"testing"
)

func TestKubernetesVersionOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
		ok   bool
	}{
		{
			name: "dependency",
			bi: debug.BuildInfo{Main: debug.Module{Path: "github.com/kubeplug/kubeplug/localcluster"}, Deps: []*debug.Module{
				{Path: "k8s.io/apiserver", Version: "v0.37.1"},
				{Path: "k8s.io/kubernetes", Version: "v1.37.1"},
			}},
			want: "1.37.1", ok: true,
		},
		{
			name: "replaced",
			bi: debug.BuildInfo{Deps: []*debug.Module{
				{Path: "k8s.io/kubernetes", Version: "v1.36.0", Replace: &debug.Module{Path: "k8s.io/kubernetes", Version: "v1.36.4"}},
			}},
			want: "1.36.4", ok: true,
		},
		{
			name: "main module",
			bi:   debug.BuildInfo{Main: debug.Module{Path: "k8s.io/kubernetes", Version: "v1.38.0-alpha.1"}},
			want: "1.38.0-alpha.1", ok: true,
		},
		{name: "development build", bi: debug.BuildInfo{Main: debug.Module{Path: "k8s.io/kubernetes", Version: "(devel)"}}},
		{name: "no kubernetes", bi: debug.BuildInfo{Deps: []*debug.Module{{Path: "k8s.io/client-go", Version: "v0.37.1"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := kubernetesVersionOf(&tc.bi)
			if got != tc.want || ok != tc.ok {
				t.Errorf("kubernetesVersionOf = %q, %t; want %q, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestKubernetesVersion reads the version of the binaries the tests run: the one
// localcluster/go.mod pins.
func TestKubernetesVersion(t *testing.T) {
	gomod, err := os.ReadFile("../../../../localcluster/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes v([0-9][^\s]*)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("localcluster/go.mod requires no k8s.io/kubernetes")
	}
	got, err := KubernetesVersion("")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(m[1]) {
		t.Errorf("KubernetesVersion = %q, want %s (localcluster/go.mod)", got, m[1])
	}
}
