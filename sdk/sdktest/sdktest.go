package sdktest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime"
	"github.com/kubeplug/kubeplug/pkg/stage"
	"github.com/kubeplug/kubeplug/sdk"
)

// Build compiles the Go main package mainPkg (a directory or an import path) to
// out, failing t on error, and returns out. It builds as a plugin should ship:
// stripped and without local paths (-trimpath -ldflags="-s -w"), which also keeps
// the binary under the 16 MiB limit for a file in a package.
func Build(t testing.TB, mainPkg, out string) string {
	t.Helper()
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", out}
	cmd := exec.CommandContext(context.Background(), "go", append(args, mainPkg)...)
	if dir, err := filepath.Abs(mainPkg); err == nil {
		if info, err := os.Stat(dir); err == nil && info.IsDir() {
			cmd = exec.CommandContext(context.Background(), "go", append(args, ".")...)
			cmd.Dir = dir
		}
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", mainPkg, err, b)
	}
	return out
}

// Digest returns the hex sha256 of the file at path, failing t on error.
func Digest(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

var sha256Field = regexp.MustCompile(`(sha256:\s*)"?[0-9a-fA-F]{64}"?`)

// Package copies the plugin package in dir to a temporary directory, builds the
// Go main package in dir to the runtime's command[0] inside the copy, writes the
// binary's digest into the copy's plugin.yaml (which must hold a 64-digit
// sha256 placeholder) and returns the copy's directory.
func Package(t testing.TB, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		t.Fatalf("copy %s: %v", dir, err)
	}
	manifest := filepath.Join(dst, plugin.ManifestFile)
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	// Decoded, not loaded: loading checks that the executable exists, and it is
	// not built yet.
	m, _, l := plugin.DecodeManifest(manifest, b)
	if m == nil || m.Spec.Runtime == nil || len(m.Spec.Runtime.Command) == 0 {
		t.Fatalf("%s: expected a spec.runtime with a command\n%s", manifest, l)
	}
	bin := Build(t, dir, filepath.Join(dst, filepath.FromSlash(m.Spec.Runtime.Command[0])))
	if !sha256Field.Match(b) {
		t.Fatalf("%s: no sha256 field to pin the binary's digest in", manifest)
	}
	b = sha256Field.ReplaceAll(b, []byte(`${1}"`+Digest(t, bin)+`"`))
	if err := os.WriteFile(manifest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// load loads the package in dir, failing t on a fatal diagnostic.
func load(t testing.TB, dir string) *plugin.Package {
	t.Helper()
	p, l := plugin.Load(os.DirFS(dir), plugin.OriginUser, dir)
	if p == nil {
		t.Fatalf("load %s:\n%s", dir, l)
	}
	return p
}

// RunStage runs one stage of a plugin through kubeplug's own runtime and returns
// its answer (nil for a stage the plugin does not implement), failing t on error.
// path is a plugin package directory, whose plugin.yaml says how to run it, or a
// plugin executable built with the SDK, run as a grpc plugin. Empty fields of req
// are filled in: the stage (initialise), the plugin's name and version and an
// empty model. The plugin's stderr goes to t.Log.
func RunStage(t testing.TB, path string, req *sdk.Request) *sdk.Response {
	t.Helper()
	pkg := packageAt(t, path)
	r := *req
	if r.Stage == "" {
		r.Stage = stage.Initialise
	}
	if r.Plugin == "" {
		r.Plugin = pkg.Name
	}
	if r.Version == "" && pkg.Version != nil {
		r.Version = pkg.Version.String()
	}
	if r.Model == nil {
		r.Model = model.New()
	}
	rt, err := runtime.New(pkg, runtime.Options{Logger: slog.New(slog.NewTextHandler(logWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := rt.(io.Closer); ok {
		defer func() { _ = c.Close() }()
	}
	resp, err := rt.Run(context.Background(), &r)
	if err != nil {
		t.Fatalf("%s stage of %s: %v", r.Stage, path, err)
	}
	return resp
}

func packageAt(t testing.TB, path string) *plugin.Package {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.IsDir() {
		p := load(t, path)
		if p.Manifest.Spec.Runtime == nil {
			t.Fatalf("%s has no spec.runtime", path)
		}
		return p
	}
	dir, name := filepath.Split(path)
	return &plugin.Package{
		Name:     name,
		FS:       os.DirFS(dir),
		Location: dir,
		Manifest: &v1alpha1.Plugin{Spec: v1alpha1.PluginSpec{Runtime: &v1alpha1.Runtime{
			Type: v1alpha1.RuntimeGRPC, Command: []string{name}, SHA256: Digest(t, path),
		}}},
	}
}

// logWriter sends a plugin's log to t.Log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}
