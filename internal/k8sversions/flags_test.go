package k8sversions

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagTablesCurrent: the checked-in flag tables are what the generator
// writes from the binaries this repository builds, when they are at hand
// (KUBEPLUG_LOCALCLUSTER_BIN, a list like $PATH).
func TestFlagTablesCurrent(t *testing.T) {
	dirs := filepath.SplitList(os.Getenv("KUBEPLUG_LOCALCLUSTER_BIN"))
	if len(dirs) == 0 {
		t.Skip("KUBEPLUG_LOCALCLUSTER_BIN is not set")
	}
	for _, dir := range dirs {
		version, tables, err := ReadFlagTables(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, tab := range tables {
			file := filepath.Join("flags", version, tab.Component+".yaml")
			got, err := os.ReadFile(file)
			if err != nil {
				t.Errorf("%s: %v; run go generate ./internal/k8sversions", file, err)
				continue
			}
			if want := tab.Encode(version); string(got) != string(want) {
				t.Errorf("%s is not what %s --help says; run go generate ./internal/k8sversions", file, tab.Component)
			}
		}
	}
}

// TestFlagTables: the embedded tables parse and name every component for a
// version versions.yaml supports.
func TestFlagTables(t *testing.T) {
	if _, err := flagTables(); err != nil {
		t.Fatal(err)
	}
	tabs := FlagTables("v1.37.2") // the latest patch release of 1.37 the tables have
	for _, c := range FlagComponents {
		if len(tabs[c].Flags) == 0 {
			t.Errorf("no flags for %s", c)
		}
	}
	if FlagTables("1.12.0") != nil || FlagTables("not a version") != nil {
		t.Error("tables for a version the tables do not have")
	}
}

func TestCheckFlag(t *testing.T) {
	for _, tc := range []struct {
		component, name, value string
		want                   string // a part of the message; "" for none
		fatal                  bool
	}{
		{"kube-apiserver", "oidc-issuer-url", "https://issuer.example.com", "", false},
		{"kube-apiserver", "oidc-issuer-url", "not a url", "expected an absolute URL", true},
		{"kube-apiserver", "no-such-flag", "7", "kube-apiserver 1.37.1 has no flag --no-such-flag", true},
		{"kube-apiserver", "secure-prot", "6443", `did you mean "secure-port"?`, true},
		{"kube-apiserver", "secure-port", "6443", "", false},
		{"kube-apiserver", "secure-port", "https", "expected an integer (int)", true},
		{"kube-apiserver", "profiling", "yes", "expected a bool", true},
		{"kube-apiserver", "profiling", "false", "", false},
		{"kube-apiserver", "advertise-address", "10.0.0.1", "", false},
		{"kube-apiserver", "advertise-address", "host.example", "expected an IP address", true},
		{"kube-apiserver", "etcd-servers", "http://127.0.0.1:2379,https://10.0.0.2:2379", "", false},
		{"kube-apiserver", "etcd-servers", "127.0.0.1:2379", "comma-separated absolute URLs", true},
		{"kube-apiserver", "tls-min-version", "VersionTLS13", "", false},
		{"kube-apiserver", "tls-min-version", "TLS1.3", "expected one of VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13", true},
		{"kube-apiserver", "endpoint-reconciler-type", "", "", false},
		{"kube-controller-manager", "node-monitor-grace-period", "40", "expected a duration", true},
		{"kube-controller-manager", "node-monitor-grace-period", "40s", "", false},
		{"kubelet", "cgroup-driver", "systemd", "", false},
		{"kubelet", "cgroup-driver", "upstart", "expected one of cgroupfs, systemd", true},
		{"kubelet", "enforce-node-allocatable", "pods,kube-reserved", "", false},
		{"kubelet", "enforce-node-allocatable", "pods,nodes", "expected one of", true},
		{"etcd", "unsafe-no-fsync", "true", "", false},
		{"etcd", "peer-cert-file", "/x", "etcd 3.7.0 has no flag --peer-cert-file", false},
		{"kube-proxy", "anything", "x", "", false}, // no table: nothing checked
	} {
		t.Run(tc.component+"/"+tc.name+"="+tc.value, func(t *testing.T) {
			msg, fatal := CheckFlag("1.37.1", tc.component, tc.name, tc.value)
			if tc.want == "" && msg != "" || !strings.Contains(msg, tc.want) || fatal != tc.fatal {
				t.Errorf("CheckFlag = %q, %t; want %q, %t", msg, fatal, tc.want, tc.fatal)
			}
		})
	}
}

// TestParseHelp: pflag's layout (a type after one space, a bool without one,
// a shorthand, a value-less form) and Go's flag package's.
func TestParseHelp(t *testing.T) {
	pf := ParseHelp("c", "1.0.0", `Usage:
  c [flags]

Generic flags:

      --address ip                 The IP address. (default 0.0.0.0)
      --anonymous-auth             Enables anonymous requests. (default true)
      --mode string                The mode. Possible values: 'a', 'b'. (default "a")
                                   A second line --not-a-flag string of the usage.
  -v, --v Level                    number for the log level verbosity
      --version version[=true]     --version, --version=raw prints version information
  -h, --help                       help for c
`)
	want := map[string]Flag{"address": {Type: "ip"}, "anonymous-auth": {Type: "bool"}, "mode": {Type: "string", Enum: []string{"a", "b"}},
		"v": {Type: "Level"}, "version": {Type: "version"}}
	if len(pf.Flags) != len(want) || !pf.Complete {
		t.Fatalf("flags %v, complete %t; want %v", pf.Flags, pf.Complete, want)
	}
	for n, f := range want {
		if got := pf.Flags[n]; got.Type != f.Type || strings.Join(got.Enum, ",") != strings.Join(f.Enum, ",") {
			t.Errorf("%s: %+v, want %+v", n, got, f)
		}
	}
	gf := ParseHelp("e", "3.0.0", "Usage of e:\n  -data-dir string\n    \tpath\n  -listen-client-urls string\n    \tURLs\n  -unsafe-no-fsync\n    \tno fsync\n")
	if gf.Complete || gf.Flags["data-dir"].Type != "string" || gf.Flags["listen-client-urls"].Type != FlagURLs || gf.Flags["unsafe-no-fsync"].Type != "bool" {
		t.Errorf("go flag help: %+v", gf)
	}
}
