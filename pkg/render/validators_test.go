package render_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ignv34 "github.com/coreos/ignition/v2/config/v3_4"
	yaml "go.yaml.in/yaml/v3"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// The validators are the real tools from Debian. A missing tool fails the test: CI
// installs them with `make validators`, and a skipped validation would read as a pass.
func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("validator %s is not installed (run `make validators`): %v", name, err)
	}
	return p
}

func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func writeTemp(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func pools(files map[string][]byte) []string {
	var out []string
	for name := range files {
		if p, ok := strings.CutSuffix(strings.TrimPrefix(name, "nodes/"), "/cloud-init.yaml"); ok && strings.HasPrefix(name, "nodes/") {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func TestCloudInitSchema(t *testing.T) {
	bin := lookPath(t, "cloud-init")
	eachPool(t, func(t *testing.T, files map[string][]byte, pool string) {
		dir := t.TempDir()
		p := writeTemp(t, dir, "nodes/"+pool+"/cloud-init.yaml", files["nodes/"+pool+"/cloud-init.yaml"])
		out, err := run(t, bin, "schema", "--config-file", p)
		if err != nil || !strings.Contains(out, "Valid cloud-config") {
			t.Fatalf("cloud-init schema --config-file %s: %v\n%s", p, err, out)
		}
	})
}

func TestIgnitionValidate(t *testing.T) {
	bin := lookPath(t, "ignition-validate")
	eachPool(t, func(t *testing.T, files map[string][]byte, pool string) {
		dir := t.TempDir()
		name := "nodes/" + pool + "/ignition.json"
		p := writeTemp(t, dir, name, files[name])
		out, err := run(t, bin, p)
		if err != nil && strings.Contains(out, "unsupported config version") {
			// Debian bookworm ships Ignition 2.14, which knows spec 3.4.0 only as
			// 3.4.0-experimental; the fields kubeplug writes are the same in both.
			t.Logf("%s does not know spec 3.4.0 (%s); validating as 3.4.0-experimental", bin, strings.TrimSpace(out))
			exp := bytes.Replace(files[name], []byte(`"version": "3.4.0"`), []byte(`"version": "3.4.0-experimental"`), 1)
			p = writeTemp(t, dir, "experimental/"+name, exp)
			out, err = run(t, bin, p)
		}
		// Warnings are failures too: ignition-validate prints nothing for a clean config.
		if err != nil || strings.TrimSpace(out) != "" {
			t.Fatalf("ignition-validate %s: %v\n%s", p, err, out)
		}
	})
}

// TestIgnitionSpec34 parses the configs with Ignition's own config package for spec
// 3.4.0 (the code ignition-validate runs, at a release that has 3.4.0 stable), since
// Debian's ignition-validate only knows the experimental draft of it.
func TestIgnitionSpec34(t *testing.T) {
	eachPool(t, func(t *testing.T, files map[string][]byte, pool string) {
		_, rpt, err := ignv34.Parse(files["nodes/"+pool+"/ignition.json"])
		if err != nil || len(rpt.Entries) > 0 {
			t.Fatalf("nodes/%s/ignition.json is not a clean Ignition 3.4.0 config: %v\n%s", pool, err, rpt.String())
		}
	})
}

// ignitionConfig is the part of an Ignition config the test reads back.
type ignitionConfig struct {
	Storage struct {
		Files []struct {
			Path     string `json:"path"`
			Mode     int    `json:"mode"`
			Contents struct {
				Source string `json:"source"`
			} `json:"contents"`
		} `json:"files"`
	} `json:"storage"`
	Systemd struct {
		Units []struct {
			Name     string `json:"name"`
			Contents string `json:"contents"`
			Dropins  []struct {
				Name     string `json:"name"`
				Contents string `json:"contents"`
			} `json:"dropins"`
		} `json:"units"`
	} `json:"systemd"`
}

// TestSystemdAnalyzeVerify lays out each pool's machine as a root directory (the host's
// own systemd units standing in for the image's, plus everything both node formats
// write) and runs the full `systemd-analyze verify` on every rendered unit, including
// its check that ExecStart binaries exist. The binaries the image would provide (the
// node agent, the kubelet, /usr/bin/true) are stubs there, and units the image has
// (containerd.service, kubelet.service) get a minimal base unit for the drop-ins.
// Any output fails, so unknown keys and sections, which systemd only warns about, fail.
func TestSystemdAnalyzeVerify(t *testing.T) {
	bin := lookPath(t, "systemd-analyze")
	cp := lookPath(t, "cp")
	eachPool(t, func(t *testing.T, files map[string][]byte, pool string) {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "usr/lib/systemd"), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := run(t, cp, "-a", "/usr/lib/systemd/system", filepath.Join(root, "usr/lib/systemd/")); err != nil {
			t.Fatalf("copying the host's systemd units: %v\n%s", err, out)
		}
		for _, stub := range []string{render.AgentPath, render.KubeletPath, "/usr/bin/true"} {
			p := writeTemp(t, root, stub, []byte("#!/bin/sh\n"))
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, base := range []string{"containerd.service", "kubelet.service"} {
			writeTemp(t, root, "usr/lib/systemd/system/"+base, []byte("[Unit]\nDescription=image's "+base+"\n\n[Service]\nExecStart=/usr/bin/true\n"))
		}

		written := map[string][]byte{}
		put := func(p string, b []byte) {
			t.Helper()
			if prev, ok := written[p]; ok && !bytes.Equal(prev, b) {
				t.Fatalf("cloud-init and Ignition write different contents to %s", p)
			}
			written[p] = b
			writeTemp(t, root, p, b)
		}
		var cc struct {
			WriteFiles []struct {
				Path    string `yaml:"path"`
				Content string `yaml:"content"`
			} `yaml:"write_files"`
		}
		if err := yaml.Unmarshal(files["nodes/"+pool+"/cloud-init.yaml"], &cc); err != nil {
			t.Fatal(err)
		}
		var units []string
		for _, f := range cc.WriteFiles {
			put(f.Path, []byte(f.Content))
			if d, name := path.Split(f.Path); d == "/etc/systemd/system/" {
				units = append(units, name)
			}
		}
		var ign ignitionConfig
		if err := json.Unmarshal(files["nodes/"+pool+"/ignition.json"], &ign); err != nil {
			t.Fatal(err)
		}
		for _, f := range ign.Storage.Files {
			b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(f.Contents.Source, "data:;base64,"))
			if err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
			put(f.Path, b)
		}
		for _, u := range ign.Systemd.Units {
			if u.Contents != "" {
				put("/etc/systemd/system/"+u.Name, []byte(u.Contents))
			}
			for _, d := range u.Dropins {
				put("/etc/systemd/system/"+u.Name+".d/"+d.Name, []byte(d.Contents))
			}
			units = append(units, u.Name)
		}
		units = dedupe(units)
		for _, want := range []string{"kubelet.service", "kubeplug-boot.service", "kubeplug-after-deploy.service", "kubeplug-after-deploy.path"} {
			if !contains(units, want) {
				t.Fatalf("%s is not among the rendered units %v", want, units)
			}
		}
		args := append([]string{"verify", "--man=no", "--root=" + root}, units...)
		out, err := run(t, bin, args...)
		if err != nil || strings.TrimSpace(out) != "" {
			t.Fatalf("systemd-analyze %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
}

// eachPool runs check on every pool of the full model and of a model nobody
// contributed to, the two ends of what the renderers see.
func eachPool(t *testing.T, check func(t *testing.T, files map[string][]byte, pool string)) {
	inputs := []struct {
		name string
		in   render.Input
	}{
		{"full", fullInput(t)},
		{"empty", render.Input{ClusterName: "empty", KubernetesVersion: "1.37.2", Model: model.New(model.PoolSpec{Name: "workers", Role: model.RoleWorker, Count: 1})}},
	}
	for _, in := range inputs {
		files := mustRender(t, in.in)
		for _, pool := range pools(files) {
			t.Run(in.name+"/"+pool, func(t *testing.T) { check(t, files, pool) })
		}
	}
}

func dedupe(s []string) []string {
	var out []string
	for _, x := range s {
		if !contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}
