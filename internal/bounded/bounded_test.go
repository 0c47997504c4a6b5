package bounded

import (
	"errors"
	"io"
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
		{"FIFO without writer", nowriter, "", ErrNoData},
		{"device that is empty", "/dev/null", "", ErrNoData},
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

// TestReadFileFedFIFO reads a FIFO whose writer delivers and then closes, as
// `kubeplug apply -f <(cmd)` gives: the content, not an error.
func TestReadFileFedFIFO(t *testing.T) {
	fed := filepath.Join(t.TempDir(), "fed")
	if err := syscall.Mkfifo(fed, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fed, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("fifo"); err != nil {
		t.Fatal(err)
	}
	// Close the writer once ReadFile holds the FIFO open too (two descriptors of
	// this process name it), so its bytes are read before the end of file.
	go func() {
		defer func() { _ = w.Close() }()
		for range 500 {
			if openCount(fed) >= 2 {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	got, err := ReadFile(fed, 10)
	if err != nil || string(got) != "fifo" {
		t.Fatalf("ReadFile = %q, %v; want %q", got, err, "fifo")
	}
}

// openCount is how many of this process's descriptors name path.
func openCount(path string) int {
	fds, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

func TestOpenFileRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "a.tgz")
	if err := os.WriteFile(reg, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.tgz")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		err        error
		text       string
	}{
		{"regular", reg, nil, ""},
		{"FIFO, no writer", fifo, ErrNotRegular, "is a FIFO"},
		{"device", "/dev/zero", ErrNotRegular, "is a character device"},
		{"directory", dir, ErrIsDir, ""},
		{"missing", filepath.Join(dir, "nope"), fs.ErrNotExist, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			var f *os.File
			var err error
			go func() { f, _, err = OpenFile(tc.path); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				t.Fatal("OpenFile blocked")
			}
			if f != nil {
				_ = f.Close()
			}
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.err, tc.text)
			}
		})
	}
}

func TestReadLine(t *testing.T) {
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = zero.Close() }()
	for _, tc := range []struct {
		name string
		in   io.Reader
		want string
		err  error
	}{
		{"line", strings.NewReader("s3cret\nrest"), "s3cret", nil},
		{"crlf", strings.NewReader("s3cret\r\n"), "s3cret", nil},
		{"no newline", strings.NewReader("s3cret"), "s3cret", nil},
		{"empty", strings.NewReader(""), "", nil},
		{"exactly the limit", strings.NewReader(strings.Repeat("x", 16) + "\n"), strings.Repeat("x", 16), nil},
		{"over the limit", strings.NewReader(strings.Repeat("x", 17)), "", ErrTooLarge},
		{"over the limit with newline", strings.NewReader(strings.Repeat("x", 17) + "\n"), "", ErrTooLarge},
		{"/dev/zero", zero, "", ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadLine(tc.in, 16)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("ReadLine = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
