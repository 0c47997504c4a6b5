package plugins_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
	"github.com/kubeplug/kubeplug/test/harness/testmachine"
)

// These tests run node-monitoring's install hook the way the local provider runs it
// on a simulated node: the plugin is rendered from a cluster file, the pool's
// rendered files (the settings file, the hooks manifest, the hook's script) are laid
// down under a machine root, and the real node agent runs the beforeNodeup phase
// with that root. The node_exporter binaries are small shell scripts that answer
// --version like the real one, except in TestNodeMonitoringInstallsRealNodeExporter.

const wantVersion = "1.9.1"

// fakeExporter writes an executable at file that reports version like node_exporter.
func fakeExporter(t *testing.T, file, version string) {
	t.Helper()
	script := fmt.Sprintf("#!/bin/sh\necho 'node_exporter, version %s (branch: HEAD, revision: fake)'\n", version)
	writeFile(t, file, []byte(script), 0o755)
}

func writeFile(t *testing.T, file string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, mode); err != nil {
		t.Fatal(err)
	}
}

// machine renders a one-pool cluster enabling node-monitoring with values (YAML
// flow mapping) and lays the pool's files down under a new root, which it returns.
func machine(t *testing.T, values string) string {
	t.Helper()
	dir := t.TempDir()
	cluster := `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: monitoring-test}
spec:
  kubernetesVersion: 1.37.1
  provider: {local: {}}
  nodePools: [{name: workers, role: worker, count: 1}]
  plugins:
    enabled:
      - name: node-monitoring
        values: ` + values + "\n"
	file := filepath.Join(dir, "cluster.yaml")
	writeFile(t, file, []byte(cluster), 0o644)
	cfg := &action.Config{Env: func(string) (string, bool) { return "", false }}
	cl, l := config.Load(file)
	if cl == nil {
		t.Fatal(l)
	}
	files, fl := action.NewRender(cfg).Files(context.Background(), cl)
	l = append(l, fl...)
	if l.HasFatal() {
		t.Fatalf("render:\n%s", l)
	}
	root := testmachine.FromCloudInit(t, files, "workers", filepath.Join(dir, "root"))
	if _, err := os.Stat(filepath.Join(root, "etc/default/node-exporter")); err != nil {
		t.Fatalf("the pool's files lack node-monitoring's settings file: %v", err)
	}
	return root
}

// runHook runs the beforeNodeup phase on root and returns the install hook's result
// and the agent's error.
func runHook(t *testing.T, root string) (nodeagent.HookResult, error) {
	t.Helper()
	agent, err := nodeagent.New(nodeagent.Options{Root: root, Node: hookspec.Node{Name: "workers-0"}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := agent.Run(context.Background(), hookspec.PhaseBeforeNodeup)
	if rep == nil {
		t.Fatalf("no report: %v", err)
	}
	for _, h := range rep.Hooks {
		if h.Plugin == "node-monitoring" && h.Name == "install-node-exporter" {
			return h, err
		}
	}
	t.Fatalf("the report has no node-monitoring/install-node-exporter: %+v", rep.Hooks)
	return nodeagent.HookResult{}, err
}

// installed returns the version the binary under root answers, failing when there
// is none.
func installed(t *testing.T, root string) string {
	t.Helper()
	file := filepath.Join(root, "usr/local/bin/node_exporter")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatalf("node_exporter is not installed under the machine root: %v", err)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("%s is not executable: %v", file, fi.Mode())
	}
	out, err := runVersion(file)
	if err != nil {
		t.Fatalf("%s --version: %v", file, err)
	}
	return out
}

var versionLine = regexp.MustCompile(`(?m)^node_exporter, version (\S+)`)

func runVersion(file string) (string, error) {
	out, err := execOutput(file, "--version")
	if err != nil {
		return "", err
	}
	m := versionLine.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("no version in %q", out)
	}
	return m[1], nil
}

func TestNodeMonitoringInstallHook(t *testing.T) {
	hostBin := "/usr/local/bin/node_exporter"
	_, hostErr := os.Stat(hostBin)
	hostHad := hostErr == nil

	for _, tc := range []struct {
		name string
		// setup prepares the root and the host; it returns the values for the plugin.
		setup func(t *testing.T, host string) string
		// prepare changes the rendered machine before the hook runs.
		prepare func(t *testing.T, root, host string)
		// fail is a substring of the hook's stderr when it must fail; empty when it
		// must succeed and leave wantVersion installed.
		fail   string
		stdout string
	}{{
		name: "installs from a host path",
		setup: func(t *testing.T, host string) string {
			fakeExporter(t, filepath.Join(host, "node_exporter"), wantVersion)
			return fmt.Sprintf("{source: %s}", filepath.Join(host, "node_exporter"))
		},
		stdout: "installed node_exporter " + wantVersion,
	}, {
		name: "prefers the machine's copy of the source",
		setup: func(t *testing.T, host string) string {
			fakeExporter(t, filepath.Join(host, "node_exporter"), "1.0.0")
			return fmt.Sprintf("{source: %s}", filepath.Join(host, "node_exporter"))
		},
		prepare: func(t *testing.T, root, host string) {
			fakeExporter(t, filepath.Join(root, host, "node_exporter"), wantVersion)
		},
		stdout: "installed node_exporter " + wantVersion,
	}, {
		name: "installs from a release tarball",
		setup: func(t *testing.T, host string) string {
			tarball(t, filepath.Join(host, "node_exporter-"+wantVersion+".linux-amd64.tar.gz"), wantVersion)
			return fmt.Sprintf("{source: %s}", filepath.Join(host, "node_exporter-"+wantVersion+".linux-amd64.tar.gz"))
		},
		stdout: "installed node_exporter " + wantVersion,
	}, {
		name:  "accepts the installed binary of the expected version",
		setup: func(*testing.T, string) string { return "{}" },
		prepare: func(t *testing.T, root, _ string) {
			fakeExporter(t, filepath.Join(root, "usr/local/bin/node_exporter"), wantVersion)
		},
		stdout: "node_exporter " + wantVersion + " is installed",
	}, {
		name: "replaces an installed binary of another version",
		setup: func(t *testing.T, host string) string {
			fakeExporter(t, filepath.Join(host, "node_exporter"), wantVersion)
			return fmt.Sprintf("{source: %s}", filepath.Join(host, "node_exporter"))
		},
		prepare: func(t *testing.T, root, _ string) {
			fakeExporter(t, filepath.Join(root, "usr/local/bin/node_exporter"), "1.8.0")
		},
		stdout: "is version 1.8.0, expected " + wantVersion + ": replacing it",
	}, {
		name:  "fails without a source",
		setup: func(*testing.T, string) string { return "{}" },
		fail:  "node_exporter " + wantVersion + " is missing at ",
	}, {
		name:  "fails on a source that exists nowhere",
		setup: func(_ *testing.T, host string) string { return fmt.Sprintf("{source: %s/missing}", host) },
		fail:  "exists neither on this machine",
	}, {
		name: "fails on a source of another version",
		setup: func(t *testing.T, host string) string {
			fakeExporter(t, filepath.Join(host, "node_exporter"), "1.8.0")
			return fmt.Sprintf("{source: %s}", filepath.Join(host, "node_exporter"))
		},
		fail: "is node_exporter 1.8.0, expected " + wantVersion,
	}, {
		name: "fails on a source whose digest differs",
		setup: func(t *testing.T, host string) string {
			fakeExporter(t, filepath.Join(host, "node_exporter"), wantVersion)
			return fmt.Sprintf("{source: %s, sha256: \"%s\"}", filepath.Join(host, "node_exporter"), strings.Repeat("0", 64))
		},
		fail: "expected " + strings.Repeat("0", 64),
	}, {
		// The values schema already refuses an https source without sha256; the
		// script refuses it too, for a settings file edited by hand.
		name:  "refuses a URL without sha256",
		setup: func(*testing.T, string) string { return "{}" },
		prepare: func(t *testing.T, root, _ string) {
			conf := filepath.Join(root, "etc/default/node-exporter")
			b, err := os.ReadFile(conf)
			if err != nil {
				t.Fatal(err)
			}
			b = bytes.Replace(b, []byte(`NODE_EXPORTER_SOURCE=""`), []byte(`NODE_EXPORTER_SOURCE="https://downloads.example.invalid/node_exporter.tar.gz"`), 1)
			writeFile(t, conf, b, 0o644)
		},
		fail: "no sha256 is set; refusing to install an unverified binary",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			host := t.TempDir()
			root := machine(t, tc.setup(t, host))
			if tc.prepare != nil {
				tc.prepare(t, root, host)
			}
			res, err := runHook(t, root)
			if tc.fail != "" {
				var he *nodeagent.HookError
				if !errors.As(err, &he) || he.Hook != "install-node-exporter" || he.Node != "workers-0" {
					t.Fatalf("want a *HookError naming install-node-exporter on workers-0, got %v", err)
				}
				if res.Status != nodeagent.StatusFailed || !strings.Contains(res.Stderr, tc.fail) {
					t.Fatalf("want a failure saying %q, got %s: stderr %q, stdout %q", tc.fail, res.Status, res.Stderr, res.Stdout)
				}
				if _, err := os.Stat(filepath.Join(root, "usr/local/bin/node_exporter")); err == nil && tc.prepare == nil {
					t.Errorf("a failed install left a binary behind")
				}
				return
			}
			if err != nil {
				t.Fatalf("hook failed: %v; stderr %q", err, res.Stderr)
			}
			if res.Status != nodeagent.StatusSucceeded || !strings.Contains(res.Stdout, tc.stdout) {
				t.Fatalf("want success saying %q, got %s: stdout %q, stderr %q", tc.stdout, res.Status, res.Stdout, res.Stderr)
			}
			if got := installed(t, root); got != wantVersion {
				t.Errorf("installed version %s, want %s", got, wantVersion)
			}
			if _, err := os.Stat(filepath.Join(root, "var/lib/node_exporter/textfile")); err != nil {
				t.Errorf("the textfile directory is not under the machine root: %v", err)
			}
			if _, err := os.Stat(hostBin); (err == nil) != hostHad {
				t.Errorf("the hook changed the host's %s", hostBin)
			}
		})
	}
}

// tarball writes a release-like archive holding node_exporter-<v>/node_exporter.
func tarball(t *testing.T, file, version string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	body := fmt.Sprintf("#!/bin/sh\necho 'node_exporter, version %s (branch: HEAD, revision: fake)'\n", version)
	for _, h := range []*tar.Header{
		{Name: "node_exporter-" + version + ".linux-amd64/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "node_exporter-" + version + ".linux-amd64/LICENSE", Mode: 0o644, Size: 3},
		{Name: "node_exporter-" + version + ".linux-amd64/node_exporter", Mode: 0o755, Size: int64(len(body))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(h.Name, "LICENSE"):
			_, _ = tw.Write([]byte("MIT"))
		case strings.HasSuffix(h.Name, "node_exporter"):
			_, _ = tw.Write([]byte(body))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, file, buf.Bytes(), 0o644)
}

func execOutput(file string, args ...string) (string, error) {
	out, err := exec.Command(file, args...).CombinedOutput() //nolint:gosec // the test's own binaries
	return string(out), err
}

// TestNodeMonitoringInstallsRealNodeExporter installs the node_exporter `make
// node-exporter` builds from its Go module (or the one $KUBEPLUG_NODE_EXPORTER
// names), the binary examples/baseline gives its simulated nodes.
func TestNodeMonitoringInstallsRealNodeExporter(t *testing.T) {
	bin := os.Getenv("KUBEPLUG_NODE_EXPORTER")
	if bin == "" {
		var err error
		if bin, err = filepath.Abs("../_output/tools/node_exporter"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no node_exporter at %s (run make node-exporter): %v", bin, err)
	}
	root := machine(t, fmt.Sprintf("{source: %s}", bin))
	res, err := runHook(t, root)
	if err != nil || res.Status != nodeagent.StatusSucceeded {
		t.Fatalf("hook %s: %v; stdout %q, stderr %q", res.Status, err, res.Stdout, res.Stderr)
	}
	if got := installed(t, root); got != wantVersion {
		t.Errorf("installed node_exporter %s, want %s", got, wantVersion)
	}
}

// TestNodeExporterToolMatchesPlugin keeps the node_exporter that `make
// node-exporter` builds (pinned in tools/node-exporter/go.mod) at the version the
// plugin's install hook expects by default; otherwise every simulated node of
// examples/baseline would refuse it.
func TestNodeExporterToolMatchesPlugin(t *testing.T) {
	gomod, err := os.ReadFile("../tools/node-exporter/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/prometheus/node_exporter v(\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("tools/node-exporter/go.mod requires no github.com/prometheus/node_exporter")
	}
	b, err := os.ReadFile("node-monitoring/plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Spec struct {
			Values struct {
				Defaults struct {
					Version string `json:"version"`
				} `json:"defaults"`
			} `json:"values"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if got, want := string(m[1]), p.Spec.Values.Defaults.Version; got != want {
		t.Errorf("tools/node-exporter/go.mod builds node_exporter %s; node-monitoring's values default to version %s", got, want)
	}
	if wantVersion != p.Spec.Values.Defaults.Version {
		t.Errorf("the tests expect version %s; node-monitoring defaults to %s", wantVersion, p.Spec.Values.Defaults.Version)
	}
}
