package exec_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/runtime/exec"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// recorder is a plugin that appends the path it runs from ($0: the kernel passes
// a script's own path to its interpreter) and a mark to $TEST_OUT.
const recorder = `cat >/dev/null
echo "$0 verified" >>"$TEST_OUT"
echo '{"protocolVersion":"kubeplug.dev/exec/v1"}'
`

// evil is what replaces an executable: it leaves a mark of having run.
const evil = "#!/bin/sh\necho \"$0 evil\" >>\"$TEST_OUT\"\necho '{\"protocolVersion\":\"kubeplug.dev/exec/v1\"}'\n"

// runs returns the lines $TEST_OUT holds: "PATH verified" or "PATH evil".
func runs(t *testing.T, out string) []string {
	t.Helper()
	b, err := os.ReadFile(out)
	must(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestDigestMismatchRunsNothing: an executable that is not the pinned one is
// refused at the first call, with both digests, and does not run.
func TestDigestMismatchRunsNothing(t *testing.T) {
	out := filepath.Join(t.TempDir(), "runs")
	pkg := script(t, recorder, true)
	must(t, os.WriteFile(filepath.Join(pkg.Location, "bin/plugin"), []byte(evil), 0o755))
	rt := newRuntime(t, pkg, exec.Options{Env: []string{"TEST_OUT=" + out}})
	for range 2 {
		_, err := rt.Run(context.Background(), request(stage.Initialise))
		var de *exec.DigestError
		if !errors.As(err, &de) || !errors.Is(err, exec.ErrDigestMismatch) {
			t.Fatalf("error = %v, want a digest mismatch", err)
		}
		sum := sha256.Sum256([]byte(evil))
		if de.Path != "bin/plugin" || de.Actual != hex.EncodeToString(sum[:]) || de.Expected != pkg.Manifest.Spec.Runtime.SHA256 {
			t.Errorf("digest error = %+v", de)
		}
		if !strings.Contains(err.Error(), de.Expected) || !strings.Contains(err.Error(), de.Actual) {
			t.Errorf("message %q names neither digest", err)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the swapped executable ran: %v", err)
	}
}

// TestVerifiedBytesRunForTheRuntimesLife: the package's executable is read once,
// at the first call. Replacing it afterwards does not reach the runtime, which
// runs the bytes it verified, from the same copy; a new runtime, as the next run
// builds, checks the file again and refuses it.
func TestVerifiedBytesRunForTheRuntimesLife(t *testing.T) {
	out := filepath.Join(t.TempDir(), "runs")
	pkg := script(t, recorder, true)
	rt := newRuntime(t, pkg, exec.Options{Env: []string{"TEST_OUT=" + out}})
	_, err := rt.Run(context.Background(), request(stage.Initialise))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(pkg.Location, "bin/plugin"), []byte(evil), 0o755))
	_, err = rt.Run(context.Background(), request(stage.Render))
	must(t, err)
	got := runs(t, out)
	if len(got) != 2 || got[0] != got[1] || !strings.HasSuffix(got[0], " verified") {
		t.Errorf("runs = %q, want the verified copy twice, from one path", got)
	}
	if strings.HasPrefix(got[0], pkg.Location) {
		t.Errorf("ran %s, the package's file, not a private copy", got[0])
	}

	again := newRuntime(t, pkg, exec.Options{Env: []string{"TEST_OUT=" + out}})
	if _, err := again.Run(context.Background(), request(stage.Initialise)); !errors.Is(err, exec.ErrDigestMismatch) {
		t.Errorf("a new runtime: error = %v, want a digest mismatch", err)
	}
	if n := len(runs(t, out)); n != 2 {
		t.Errorf("%d runs, want the 2 above", n)
	}
}

// TestTamperedCopyIsVerifiedAgain: when the private copy is not as it was
// written — rewritten, even keeping its size and modification time, replaced,
// made writable or removed — the next call runs none of it: it verifies and
// copies the package's executable again, and says so in the log.
func TestTamperedCopyIsVerifiedAgain(t *testing.T) {
	// rewrite overwrites copy with evil, padded or cut to copy's size.
	rewrite := func(t *testing.T, copy string) {
		info, err := os.Stat(copy)
		must(t, err)
		b := []byte(evil + strings.Repeat("#", int(info.Size())))[:info.Size()]
		must(t, os.Chmod(copy, 0o700))
		must(t, os.WriteFile(copy, b, 0o700))
		must(t, os.Chmod(copy, info.Mode()))
		must(t, os.Chtimes(copy, info.ModTime(), info.ModTime()))
	}
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, copy string)
	}{
		{"rewritten keeping size, mode and mtime", rewrite},
		{"replaced by another file", func(t *testing.T, copy string) {
			next := copy + ".new"
			must(t, os.WriteFile(next, []byte(evil), 0o500))
			must(t, os.Rename(next, copy))
		}},
		{"made writable", func(t *testing.T, copy string) { must(t, os.Chmod(copy, 0o700)) }},
		{"removed", func(t *testing.T, copy string) { must(t, os.Remove(copy)) }},
		{"its directory removed", func(t *testing.T, copy string) { must(t, os.RemoveAll(filepath.Dir(copy))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "runs")
			var logs bytes.Buffer
			rt := newRuntime(t, script(t, recorder, true), exec.Options{
				Env: []string{"TEST_OUT=" + out}, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			})
			_, err := rt.Run(context.Background(), request(stage.Initialise))
			must(t, err)
			copy := strings.TrimSuffix(runs(t, out)[0], " verified")
			// A later change time than the copy's own, on coarse clocks too.
			time.Sleep(20 * time.Millisecond)
			tc.tamper(t, copy)
			for range 2 {
				_, err = rt.Run(context.Background(), request(stage.Render))
				must(t, err)
			}
			got := runs(t, out)
			if len(got) != 3 || !strings.HasSuffix(got[1], " verified") || got[1] != got[2] {
				t.Errorf("runs = %q, want the verified bytes, copied again once", got)
			}
			if n := strings.Count(logs.String(), "changed or vanished"); n != 1 {
				t.Errorf("%d warnings about the copy, want 1:\n%s", n, logs.String())
			}
			if _, err := os.Stat(filepath.Dir(copy)); !os.IsNotExist(err) {
				t.Errorf("the tampered copy's directory is left: %v", err)
			}
		})
	}
}

// TestOneCopyPerRuntime: concurrent calls of one runtime, its first among them,
// share one private copy of the executable, each with a TMPDIR of its own; Close
// leaves nothing in the temporary directory. A call after Close copies again,
// and a second Close removes that.
func TestOneCopyPerRuntime(t *testing.T) {
	out := filepath.Join(t.TempDir(), "runs")
	pkg := script(t, "cat >/dev/null\necho \"$0 $TMPDIR\" >>\"$TEST_OUT\"\necho '{\"protocolVersion\":\"kubeplug.dev/exec/v1\"}'\n", false)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	rt := newRuntime(t, pkg, exec.Options{Env: []string{"TEST_OUT=" + out}})
	const calls = 16
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Go(func() {
			_, err := rt.Run(context.Background(), request([]stage.Stage{stage.Initialise, stage.Render}[i%2]))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	copies, temps := map[string]bool{}, map[string]bool{}
	for _, l := range runs(t, out) {
		copy, temp, _ := strings.Cut(l, " ")
		copies[copy], temps[temp] = true, true
	}
	if len(copies) != 1 || len(temps) != calls {
		t.Errorf("%d calls ran %d copies with %d TMPDIRs, want 1 copy and %d TMPDIRs", calls, len(copies), len(temps), calls)
	}
	left := func() []string {
		ents, err := os.ReadDir(tmp)
		must(t, err)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	if names := left(); len(names) != 1 || !strings.HasPrefix(names[0], "kubeplug-plugin-") {
		t.Errorf("between calls, the temporary directory holds %q, want the one copy", names)
	}
	must(t, rt.Close())
	if names := left(); len(names) != 0 {
		t.Errorf("after Close, the temporary directory holds %q", names)
	}
	_, err := rt.Run(context.Background(), request(stage.Initialise))
	must(t, err)
	must(t, rt.Close())
	if names := left(); len(names) != 0 {
		t.Errorf("after a call and Close again, the temporary directory holds %q", names)
	}
}
