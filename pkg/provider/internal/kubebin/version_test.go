package kubebin

import (
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
