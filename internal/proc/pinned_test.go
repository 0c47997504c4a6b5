package proc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
)

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// emptyTemp points TMPDIR at a fresh directory and returns a function listing
// what is in it.
func emptyTemp(t *testing.T) func() []string {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	return func() []string {
		ents, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
}

// TestPinnedCopiesOnce: the first Path makes the private copy, later ones return
// it; Close removes it.
func TestPinnedCopiesOnce(t *testing.T) {
	bin := []byte("#!/bin/sh\necho hi\n")
	left := emptyTemp(t)
	p := NewPinned(fstest.MapFS{"bin/plugin": {Data: bin, Mode: 0o755}}, "bin/plugin", strings.ToUpper(digest(bin)))
	file, renewed, err := p.Path()
	if err != nil || renewed {
		t.Fatalf("Path = %q, %v, %v", file, renewed, err)
	}
	if got, err := os.ReadFile(file); err != nil || string(got) != string(bin) {
		t.Errorf("the copy holds %q (%v)", got, err)
	}
	for path, want := range map[string]os.FileMode{file: 0o500, filepath.Dir(file): 0o700 | os.ModeDir} {
		if info, err := os.Stat(path); err != nil || info.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, info.Mode(), err, want)
		}
	}
	if filepath.Base(file) != "plugin" {
		t.Errorf("the copy is named %s, want the executable's name", file)
	}
	again, renewed, err := p.Path()
	if err != nil || renewed || again != file {
		t.Errorf("second Path = %q, %v, %v; want %q, false, nil", again, renewed, err, file)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if names := left(); len(names) != 0 {
		t.Errorf("after Close, TMPDIR holds %q", names)
	}
}

// TestPinnedRefuses: what Read refuses, and an executable that is not the pinned
// one, yield an error naming it, and leave no copy behind.
func TestPinnedRefuses(t *testing.T) {
	src := t.TempDir()
	bin := filepath.Join(src, "plugin")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	huge, err := os.Create(filepath.Join(src, "huge"))
	if err == nil {
		err = errors.Join(huge.Truncate(maxExecutable+1), huge.Close()) // sparse
	}
	if err != nil {
		t.Fatal(err)
	}
	left := emptyTemp(t)
	for _, tc := range []struct{ name, want string }{
		{"plugin", "refusing to run plugin: its sha256 is " + digest([]byte("#!/bin/sh\n")) + ", but plugin.yaml expects " + digest(nil)},
		{"missing", "read executable missing: stat missing: no such file or directory"},
		{"fifo", "read executable fifo: not a regular file"},
		{"dir", "read executable dir: not a regular file"},
		{"huge", "read executable huge: 536870913 bytes is more than the limit of 536870912"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPinned(os.DirFS(src), tc.name, digest(nil))
			_, _, err := p.Path()
			if err == nil || err.Error() != tc.want {
				t.Errorf("error = %v, want %s", err, tc.want)
			}
			if errors.Is(err, ErrDigestMismatch) != (tc.name == "plugin") {
				t.Errorf("errors.Is(%v, ErrDigestMismatch) is wrong", err)
			}
			if names := left(); len(names) != 0 {
				t.Errorf("TMPDIR holds %q", names)
			}
		})
	}
}
