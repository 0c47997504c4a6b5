package lock_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/lock"
	"github.com/kubeplug/kubeplug/test/harness/fuzzseed"
)

// FuzzRead reads any kubeplug.lock: it never panics, and a lock it accepts
// survives being written and read back unchanged.
func FuzzRead(f *testing.F) {
	good := "apiVersion: kubeplug.dev/v1alpha1\nkind: PluginLock\nplugins:\n- name: a\n  version: 1.0.0\n  source: catalog\n  digest: sha256:" + strings.Repeat("ab", 32) + "\n"
	for _, s := range []string{
		good,
		good + "- name: a\n  version: 1.0.0\n  source: user\n  digest: sha256:00\n",
		"apiVersion: kubeplug.dev/v1alpha1\nkind: PluginLock\nplugins: null\n",
		"apiVersion: kubeplug.dev/v1alpha1\nkind: PluginLock\nplugins: [{name: 1, version: [x]}]\n",
		"apiVersion: kubeplug.dev/v1alpha1\nkind: PluginLock\nextra: 1\n",
		"apiVersion: v1\nkind: ConfigMap\n",
		`{"apiVersion":"kubeplug.dev/v1alpha1","kind":"PluginLock","plugins":[{"name":"a"}]}`,
		"", "\x00\x00\x00", "plugins:\n" + strings.Repeat("- {}\n", 1000),
	} {
		f.Add([]byte(s))
	}
	fuzzseed.Add(f, fuzzseed.YAML())
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, lock.FileName)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		lf, err := lock.Read(p)
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("the error does not name the file: %v", err)
			}
			return
		}
		q := filepath.Join(dir, "again", lock.FileName)
		if err := os.MkdirAll(filepath.Dir(q), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := lf.Write(q); err != nil {
			t.Fatal(err)
		}
		back, err := lock.Read(q)
		if err != nil || !back.Equal(lf) {
			t.Fatalf("written and read back: %+v, %v; want %+v", back, err, lf)
		}
	})
}
