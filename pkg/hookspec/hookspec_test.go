package hookspec_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
)

func TestCheckURL(t *testing.T) {
	good := strings.Repeat("ab", 32)
	tests := []struct{ url, sha, err string }{
		{url: "https://example.com/a.sh", sha: good},
		{url: "s3://bucket/a.sh", sha: good},
		{url: "http://example.com/a.sh", sha: good, err: `expected an https:// or s3:// URL, found scheme "http"`},
		{url: "s3://bucket", sha: good, err: "expected s3://bucket/key"},
		{url: "https://example.com/a.sh", err: "a url needs sha256"},
		{url: "https://example.com/a.sh", sha: "abc", err: `expected sha256 as 64 lower-case hex digits, found "abc"`},
	}
	for _, tt := range tests {
		err := hookspec.CheckURL(tt.url)
		if err == nil {
			err = hookspec.CheckSHA256(tt.sha)
		}
		if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("CheckURL(%q, %q) = %v, expected %q", tt.url, tt.sha, err, tt.err)
		}
	}
}

func TestCheckCondition(t *testing.T) {
	for expr, want := range map[string]string{
		"versionAtLeast(cluster.kubernetesVersion, '1.30')": "",
		"node.role == 'worker' && 'gpu' in node.labels":     "",
		"cluster.nme == 'x'":                                "undefined field 'nme'",
		"node.pool":                                         "expected bool",
		"(":                                                 "compile when",
	} {
		err := hookspec.CheckCondition(expr)
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckCondition(%q) = %v, expected %q", expr, err, want)
		}
	}
}

func TestConditionEval(t *testing.T) {
	cluster := hookspec.Cluster{Name: "demo", KubernetesVersion: "1.37.2"}
	node := hookspec.Node{Pool: "workers", Role: "worker"}
	for _, tt := range []struct {
		when, warning, err string
		want               bool
	}{
		{when: "versionAtLeast(cluster.kubernetesVersion, '1.30')", want: true},
		{when: "semver(cluster.kubernetesVersion).minor() == 37 && node.role == 'worker'", want: true},
		{when: "cluster.kubernetesVersion >= '1.30'", want: true, warning: "use versionAtLeast"},
		{when: "node.labels['gpu'] == 'yes'", err: "evaluate when: no such key: gpu"},
		{when: "semver('x') > semver('1.0')", err: `"x" is not a version`},
		{when: "node.?labels.gpu.orValue('no') == 'no'", want: true},
	} {
		t.Run(tt.when, func(t *testing.T) {
			c, err := hookspec.CompileCondition(tt.when)
			if err != nil {
				t.Fatal(err)
			}
			if w := c.Warning(); (w == "") != (tt.warning == "") || !strings.Contains(w, tt.warning) {
				t.Errorf("warning %q, expected %q", w, tt.warning)
			}
			got, err := c.Eval(t.Context(), cluster, node)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, expected %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Eval = %v, %v; expected %v", got, err, tt.want)
			}
		})
	}
}

func TestOrder(t *testing.T) {
	hooks := []hookspec.Hook{
		{Plugin: "a", Name: "one", Requires: []string{"b/two"}},
		{Plugin: "b", Name: "two"},
		{Plugin: "c", Name: "three", Before: []string{"a/one"}},
	}
	sorted, err := hookspec.Order(hooks)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range sorted {
		ids = append(ids, sorted[i].ID())
	}
	if want := []string{"b/two", "c/three", "a/one"}; !slices.Equal(ids, want) {
		t.Errorf("order %v, expected %v", ids, want)
	}
	hooks[1].Requires = []string{"a/one"}
	_, err = hookspec.Order(hooks)
	if ce := (*hookspec.CycleError)(nil); !errors.As(err, &ce) || err.Error() != "hooks order each other in a cycle: a/one -> b/two -> a/one" {
		t.Errorf("error %v, expected a *CycleError naming a/one -> b/two -> a/one", err)
	}
}
