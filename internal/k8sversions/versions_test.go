package k8sversions

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDefault: the embedded table parses, lists the version ./localcluster
// builds with that module as its source, and names every binary the local
// control plane and real nodes run.
func TestDefault(t *testing.T) {
	tab := Default()
	gomod, err := os.ReadFile("../../localcluster/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s.io/kubernetes v(\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("localcluster/go.mod names no k8s.io/kubernetes")
	}
	v, err := tab.Lookup(string(m[1]))
	if err != nil {
		t.Fatalf("the version localcluster builds: %v", err)
	}
	if v.Source != "localcluster" {
		t.Errorf("%s: source %q, want localcluster", v.Kubernetes, v.Source)
	}
	names := map[string]bool{}
	for _, a := range tab.Artifacts {
		names[a.Name] = true
	}
	for _, want := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubelet", "kube-proxy", "kubectl"} {
		if !names[want] {
			t.Errorf("no artifact %s", want)
		}
	}
}

func TestLookup(t *testing.T) {
	tab := Default()
	for _, tc := range []struct {
		in, want string
	}{
		{"1.37.1", "1.37.1"},
		{"v1.37.1", "1.37.1"},
		{"1.36.3", "1.36.3"},
		{"1.37.2", ""},
		{"1.37", ""},
		{"", ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			v, err := tab.Lookup(tc.in)
			if tc.want == "" {
				if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "1.37.1, 1.36.3") || !strings.Contains(err.Error(), File) {
					t.Fatalf("lookup %q = %v, want ErrUnsupported listing the supported versions and the file", tc.in, err)
				}
				return
			}
			if err != nil || v.Kubernetes != tc.want {
				t.Fatalf("lookup %q = %+v, %v; want %s", tc.in, v, err, tc.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"bad version": {"versions: [{kubernetes: 1.37, etcd: 3.7.0, kwok: 0.8.0, containerd: 2.4.2}]", "versions[0].kubernetes"},
		"twice":       {"versions: [{kubernetes: 1.37.1, etcd: 3.7.0, kwok: 0.8.0, containerd: 2.4.2}, {kubernetes: 1.37.1, etcd: 3.7.0, kwok: 0.8.0, containerd: 2.4.2}]", "listed twice"},
		"bad etcd":    {"versions: [{kubernetes: 1.37.1, etcd: x, kwok: 0.8.0, containerd: 2.4.2}]", "versions[0].etcd"},
		"unknown key": {"versions: [{kubernetes: 1.37.1, etcd: 3.7.0, kwok: 0.8.0, containerd: 2.4.2, docker: 1}]", "docker"},
		"algorithm":   {"artifacts: [{name: a, url: u, checksum: {algorithm: md5, kind: file, url: c}}]", "checksum.algorithm"},
		"sums name":   {"artifacts: [{name: a, url: u, checksum: {algorithm: sha256, kind: sums, url: c}}]", "checksum.name"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parse = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestEtcdGoesWithKubernetes(t *testing.T) {
	tab, err := Parse([]byte(`versions:
  - {kubernetes: 1.37.1, etcd: 3.7.0, kwok: 0.8.0, containerd: 2.4.2, source: a}
  - {kubernetes: 1.37.0, etcd: 3.6.9, kwok: 0.8.0, containerd: 2.4.2, source: b}
  - {kubernetes: 1.36.3, etcd: 3.6.8, kwok: 0.8.0, containerd: 2.4.2, source: c}
artifacts: []
`))
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]string{
		"1.37.0": "3.6.9", "v1.36.3": "3.6.8", "1.36.9": "3.6.8", "1.37.5": "3.7.0", "1.30.0": "3.7.0", "not a version": "3.7.0",
	} {
		if got := tab.Etcd(v); got != want {
			t.Errorf("Etcd(%q) = %q, want %q", v, got, want)
		}
	}
}
