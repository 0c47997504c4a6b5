package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// TestLoadBoundsReads loads cluster files that lie about their size or never end:
// each is refused, quickly, with a located message, and never read whole.
func TestLoadBoundsReads(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"endless device", "/dev/zero", "larger than the 1 MiB limit"},
		{"FIFO without a writer", fifo, "a FIFO that ended at once"},
		{"directory", dir, "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			c, l := config.Load(tc.path)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("took %s", took)
			}
			if c != nil || !strings.Contains(l.String(), tc.want) || !strings.Contains(l.String(), tc.path) {
				t.Errorf("diagnostics:\n%s\nwant one naming %s and saying %q", l, tc.path, tc.want)
			}
		})
	}
}

// TestValuesFromBoundsReads reads values from an endless device through a
// symlink: refused as outside the cluster file's directory, and when that is
// allowed, refused as too large — never read whole.
func TestValuesFromBoundsReads(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
		t.Fatal(err)
	}
	pkg, l := plugin.Load(fstest.MapFS{"plugin.yaml": {Data: []byte("apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: p, version: 1.0.0}\nspec: {}\n")}}, plugin.OriginUser, "p")
	if l.HasFatal() {
		t.Fatal(l)
	}
	data := "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: c}\nspec:\n  kubernetesVersion: 1.36.3\n  plugins: {enabled: [{name: p, valuesFrom: [{file: zero.yaml}]}]}\n"
	c, l := config.Parse(file, []byte(data))
	if c == nil {
		t.Fatal(l)
	}
	for _, tc := range []struct {
		allow bool
		want  string
	}{
		{false, "outside the cluster file's directory"},
		{true, "larger than the 1 MiB limit"},
	} {
		c.AllowValuesOutside = tc.allow
		start := time.Now()
		_, l := c.Values(0, pkg, nil)
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("took %s", took)
		}
		if !l.HasFatal() || !strings.Contains(l.String(), tc.want) || !strings.Contains(l.String(), "cluster.yaml:6:") {
			t.Errorf("allow %v: diagnostics:\n%s\nwant one at cluster.yaml:6 saying %q", tc.allow, l, tc.want)
		}
	}
}
