package exec_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime/exec"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// The benchmarks measure the exec runtime's per-call overhead: process start,
// request and response, for plugins that answer at once, and at a runtime's first
// call the digest check and private copy of the executable too. Later calls run
// the verified copy without reading or hashing it, so their cost does not grow
// with the executable. Target for later calls: < 5ms, whatever the size.
//
//	go test ./pkg/runtime/exec -run '^$' -bench . -benchtime 200x -count 3

// BenchmarkRun: a shell plugin, later calls.
func BenchmarkRun(b *testing.B) {
	benchLater(b, script(b, "cat >/dev/null\necho '"+okResponse+"'\n", true), exec.Options{})
}

// BenchmarkRunGo: a Go plugin (testdata/goplugin) as built, and padded to 64 MiB
// like a real plugin with its dependencies (data appended to an ELF does not stop
// it from running); first calls (a new runtime each: read, hash, copy, run,
// remove) and later calls.
func BenchmarkRunGo(b *testing.B) {
	gobin, err := osexec.LookPath("go")
	if err != nil {
		b.Skip("needs the go tool to build testdata/goplugin")
	}
	built := filepath.Join(b.TempDir(), "goplugin")
	if out, err := osexec.Command(gobin, "build", "-o", built, "./testdata/goplugin").CombinedOutput(); err != nil {
		b.Fatalf("build testdata/goplugin: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(built)
	if err != nil {
		b.Fatal(err)
	}
	opts := exec.Options{}
	for _, size := range []int{len(bin), 64 << 20} {
		padded := make([]byte, size)
		copy(padded, bin)
		pkg := largeExecutable(b, padded)
		name := fmt.Sprintf("size=%.1fMiB", float64(size)/(1<<20))
		b.Run(name+"/first", func(b *testing.B) {
			req := request(stage.Initialise)
			for b.Loop() {
				rt, err := exec.New(pkg, opts)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := rt.Run(context.Background(), req); err != nil {
					b.Fatal(err)
				}
				if err := rt.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/later", func(b *testing.B) { benchLater(b, pkg, opts) })
	}
}

// largeExecutable returns an on-disk package holding src as bin/plugin, pinned by
// its digest. plugin.Load refuses files over plugin.MaxFileSize, so the package
// is loaded with a stand-in whose file and pin are then replaced.
func largeExecutable(b *testing.B, src []byte) *plugin.Package {
	pkg := executable(b, []byte("#!/bin/sh\n"), true)
	if err := os.WriteFile(filepath.Join(pkg.Location, "bin/plugin"), src, 0o755); err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(src)
	pkg.Manifest.Spec.Runtime.SHA256 = hex.EncodeToString(sum[:])
	return pkg
}

// benchLater measures the calls after a runtime's first.
func benchLater(b *testing.B, pkg *plugin.Package, opts exec.Options) {
	rt, err := exec.New(pkg, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = rt.Close() }()
	req := request(stage.Initialise)
	ctx := context.Background()
	if _, err := rt.Run(ctx, req); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := rt.Run(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
