package bounded

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", 11)), 0o600); err != nil {
		t.Fatal(err)
	}
	silent := filepath.Join(dir, "silent")
	if err := syscall.Mkfifo(silent, 0o600); err != nil {
		t.Fatal(err)
	}
	// A writer that holds the FIFO open and never writes.
	w, err := os.OpenFile(silent, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	nowriter := filepath.Join(dir, "nowriter")
	if err := syscall.Mkfifo(nowriter, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline = 200 * time.Millisecond
	defer func() { deadline = Deadline }()
	for _, tc := range []struct {
		name, path string
		want       string
		err        error
	}{
		{"regular", small, "abc", nil},
		{"over the limit", big, "", ErrTooLarge},
		{"missing", filepath.Join(dir, "nope"), "", fs.ErrNotExist},
		{"directory", dir, "", ErrIsDir},
		{"device that never ends", "/dev/zero", "", ErrTooLarge},
		{"proc file claiming 0 bytes", "/proc/self/cmdline", "", ErrTooLarge},
		{"FIFO without writer", nowriter, "", nil},
		{"FIFO whose writer is silent", silent, "", ErrTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got, err := ReadFile(tc.path, 10)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("took %s", took)
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("ReadFile = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
