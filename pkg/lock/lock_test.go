package lock_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/lock"
)

// TestReadHostileFiles reads lock files that are not small regular files: each
// is a clear error naming the file, within seconds, never a read of the whole.
func TestReadHostileFiles(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		make func(p string) error
		want string
	}{
		{"device", func(p string) error { return os.Symlink("/dev/zero", p) }, "larger than the 4 MiB limit"},
		{"FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "FIFO"},
		{"sparse 2 GiB", func(p string) error {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			return f.Truncate(2 << 30)
		}, "file is 2048 MiB, larger than the 4 MiB limit"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }, "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name, lock.FileName)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(p); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			f, err := lock.Read(p)
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %s", took)
			}
			if f != nil || err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read = %v, %v; want an error naming %s and saying %q", f, err, p, tc.want)
			}
		})
	}
}

func TestReadMissingAndRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), lock.FileName)
	if f, err := lock.Read(p); f != nil || err != nil {
		t.Fatalf("Read of a missing lock = %v, %v; want nil, nil", f, err)
	}
	want := lock.New([]lock.Entry{{Name: "b", Version: "1.0.0", Source: "catalog", Digest: "sha256:" + strings.Repeat("b", 64)}, {Name: "a", Version: "2.0.0", Source: "builtin", Digest: "sha256:" + strings.Repeat("a", 64)}})
	if err := want.Write(p); err != nil {
		t.Fatal(err)
	}
	got, err := lock.Read(p)
	if err != nil || !got.Equal(want) {
		t.Fatalf("Read = %+v, %v; want %+v", got, err, want)
	}
}
