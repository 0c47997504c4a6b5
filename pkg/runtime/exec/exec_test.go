package exec_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime/exec"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// script returns a package holding a shell script as bin/plugin, pinned by its real
// digest. With dir set, the package lives on disk; otherwise in memory, like a
// built-in package.
func script(t testing.TB, body string, onDisk bool) *plugin.Package {
	t.Helper()
	return executable(t, []byte("#!/bin/sh\n"+body), onDisk)
}

// executable returns a package holding src as bin/plugin, pinned by its real
// digest, on disk or in memory.
func executable(t testing.TB, src []byte, onDisk bool) *plugin.Package {
	t.Helper()
	sum := sha256.Sum256(src)
	manifest := fmt.Sprintf(`apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: sh, version: 1.0.0}
spec:
  runtime: {type: exec, command: [bin/plugin, --flag], sha256: %s}
`, hex.EncodeToString(sum[:]))
	var (
		fsys     fs.FS
		location = "plugins/sh"
	)
	if onDisk {
		dir := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "plugin.yaml"), []byte(manifest), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "bin/plugin"), src, 0o755))
		fsys, location = os.DirFS(dir), dir
	} else {
		fsys = fstest.MapFS{
			"plugin.yaml": {Data: []byte(manifest)},
			"bin/plugin":  {Data: src, Mode: 0o755},
		}
	}
	p, l := plugin.Load(fsys, plugin.OriginUser, location)
	if l.HasFatal() {
		t.Fatal(l)
	}
	return p
}

// newRuntime returns pkg's runtime, closed when the test ends.
func newRuntime(t testing.TB, pkg *plugin.Package, opts exec.Options) *exec.Runtime {
	t.Helper()
	rt, err := exec.New(pkg, opts)
	must(t, err)
	t.Cleanup(func() { must(t, rt.Close()) })
	return rt
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func request(st stage.Stage) *stage.Request {
	return &stage.Request{
		Stage: st, Plugin: "sh", Version: "1.0.0",
		Values:  map[string]any{"secret": "s3cret"},
		Plugins: map[string]stage.PluginValues{"other": {Version: "2.0.0", Values: map[string]any{"token": "***"}}},
		Model:   model.New(),
	}
}

const okResponse = `{"protocolVersion":"kubeplug.dev/exec/v1","contribution":{"controlPlane":{"components":{"kube-apiserver":{"flags":{"v":{"value":"3"}}}}}},"diagnostics":[{"severity":"warning","message":"old"}]}`

func TestRunAnswers(t *testing.T) {
	for _, onDisk := range []bool{true, false} {
		t.Run(fmt.Sprintf("onDisk=%v", onDisk), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "request.json")
			var logs bytes.Buffer
			pkg := script(t, `cat > "$TEST_OUT"
echo "args: $*" >&2
echo "stage $KUBEPLUG_STAGE of $KUBEPLUG_PLUGIN" >&2
echo '`+okResponse+`'
`, onDisk)
			rt := newRuntime(t, pkg, exec.Options{Env: []string{"TEST_OUT=" + out}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			resp, err := rt.Run(context.Background(), request(stage.Initialise))
			must(t, err)
			if f := resp.Contribution.ControlPlane.Components[model.KubeAPIServer].Flags["v"]; f.Value != "3" {
				t.Errorf("flag v = %+v", f)
			}
			if len(resp.Diagnostics) != 1 || resp.Diagnostics[0].Message != "old" || resp.Diagnostics[0].Plugin != "" {
				t.Errorf("diagnostics = %+v", resp.Diagnostics)
			}
			b, err := os.ReadFile(out)
			must(t, err)
			var got map[string]any
			must(t, json.Unmarshal(b, &got))
			if got["protocolVersion"] != "kubeplug.dev/exec/v1" || got["stage"] != "initialise" || got["plugin"] != "sh" {
				t.Errorf("request envelope = %s", b)
			}
			if v := got["values"].(map[string]any)["secret"]; v != "s3cret" {
				t.Errorf("own values must be in clear, got %v", v)
			}
			if v := got["plugins"].(map[string]any)["other"].(map[string]any)["values"].(map[string]any)["token"]; v != "***" {
				t.Errorf("others' values must stay redacted, got %v", v)
			}
			for _, want := range []string{`plugin=sh`, `line="args: --flag"`, `line="stage initialise of sh"`} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %s:\n%s", want, logs.String())
				}
			}
			if strings.Contains(logs.String(), "s3cret") {
				t.Errorf("a sensitive value reached the log")
			}
		})
	}
}

func TestUnsupportedStage(t *testing.T) {
	for name, body := range map[string]string{
		"exit 3":           "exit 3\n",
		"unsupported JSON": `echo '{"protocolVersion":"kubeplug.dev/exec/v1","unsupported":true}'` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			rt := newRuntime(t, script(t, body, true), exec.Options{})
			resp, err := rt.Run(context.Background(), request(stage.Render))
			if err != nil || resp != nil {
				t.Errorf("Run = %v, %v; want nil, nil", resp, err)
			}
		})
	}
}

// TestFailuresAreIsolated runs plugins that misbehave in every way the protocol
// anticipates. Each must yield an error that says what happened, carrying the
// stderr tail, and leave no process behind.
func TestFailuresAreIsolated(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		opts       exec.Options
		is         error
		want       []string
		marker     string
	}{
		{name: "crash", body: "echo 'panic: boom' >&2\nexit 2\n", is: exec.ErrExit,
			want: []string{"bin/plugin exited with status 2", "stderr:\n    panic: boom"}},
		{name: "signal", body: "kill -SEGV $$\n", is: exec.ErrExit, want: []string{"killed by signal segmentation fault"}},
		{name: "crash leaving a child", body: "sleep 3011 &\necho bye >&2\nexit 1\n", is: exec.ErrExit,
			want: []string{"exited with status 1", "bye"}, marker: "3011"},
		{name: "hang", body: "echo working >&2\nsleep 3012 &\nsleep 3012\n", opts: exec.Options{Timeout: 300 * time.Millisecond},
			is: exec.ErrTimeout, want: []string{"did not answer within 300ms and was killed", "working"}, marker: "3012"},
		{name: "not JSON", body: "cat >/dev/null\necho hello\n", is: exec.ErrProtocol,
			want: []string{"response is not a valid kubeplug.dev/exec/v1 message: invalid character 'h'"}},
		{name: "unknown field", body: `echo '{"protocolVersion":"kubeplug.dev/exec/v1","contributions":{}}'` + "\n", is: exec.ErrProtocol,
			want: []string{`unknown field "contributions"`}},
		{name: "wrong protocol version", body: `echo '{"protocolVersion":"kubeplug.dev/exec/v0"}'` + "\n", is: exec.ErrProtocol,
			want: []string{`response protocolVersion is "kubeplug.dev/exec/v0", expected "kubeplug.dev/exec/v1"`}},
		{name: "two objects", body: `echo '{"protocolVersion":"kubeplug.dev/exec/v1"}{}'` + "\n", is: exec.ErrProtocol,
			want: []string{"data after its JSON object"}},
		{name: "bad severity", body: `echo '{"protocolVersion":"kubeplug.dev/exec/v1","diagnostics":[{"severity":"error","message":"x"}]}'` + "\n", is: exec.ErrProtocol,
			want: []string{`diagnostics[0].severity: expected fatal or warning, found "error"`}},
		{name: "no output", body: "exit 0\n", is: exec.ErrProtocol, want: []string{"empty response"}},
		{name: "huge output", body: "sleep 3013 &\nyes\n", opts: exec.Options{MaxOutput: 1 << 20}, is: exec.ErrOutputTooLarge,
			want: []string{"wrote more than 1048576 bytes to stdout and was killed"}, marker: "3013"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRuntime(t, script(t, tc.body, true), tc.opts)
			start := time.Now()
			resp, err := rt.Run(context.Background(), request(stage.Initialise))
			if err == nil {
				t.Fatalf("Run = %+v, want an error", resp)
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("Run took %s", d)
			}
			if tc.marker != "" {
				if pids := processes(t, "sleep", tc.marker); len(pids) > 0 {
					t.Errorf("orphans left behind: %v", pids)
				}
			}
		})
	}
}

func TestCancelKillsTheGroup(t *testing.T) {
	rt := newRuntime(t, script(t, "sleep 3014 &\nsleep 3014\n", true), exec.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := rt.Run(ctx, request(stage.Deploy))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want the context's", err)
	}
	if pids := processes(t, "sleep", "3014"); len(pids) > 0 {
		t.Errorf("orphans left behind: %v", pids)
	}
}

// processes returns the pids whose command line is exactly name followed by args.
func processes(t testing.TB, name string, args ...string) []string {
	t.Helper()
	want := strings.Join(append([]string{name}, args...), "\x00") + "\x00"
	// Give the kernel a moment to reap what was just killed.
	var found []string
	for range 50 {
		found = found[:0]
		dirs, err := os.ReadDir("/proc")
		if err != nil {
			t.Skip("no /proc")
		}
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
			if err == nil && string(b) == want {
				stat, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
				if !bytes.Contains(stat, []byte(") Z ")) {
					found = append(found, d.Name())
				}
			}
		}
		if len(found) == 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return found
}

// TestPrivateTempDir: each call's TMPDIR is a fresh directory of its own,
// readable by the plugin only, and removed, with what the plugin put there,
// when the call ends.
func TestPrivateTempDir(t *testing.T) {
	out := t.TempDir()
	pkg := script(t, `n=$(ls "$TEST_OUT" | wc -l)
echo "$TMPDIR" > "$TEST_OUT/$n"
ls -A "$TMPDIR" >> "$TEST_OUT/$n"
stat -c %a "$TMPDIR" >> "$TEST_OUT/$n"
echo left > "$TMPDIR/file"
echo '{"protocolVersion":"kubeplug.dev/exec/v1"}'
`, true)
	rt := newRuntime(t, pkg, exec.Options{Env: []string{"TEST_OUT=" + out}})
	var dirs []string
	for i := range 2 {
		_, err := rt.Run(context.Background(), request(stage.Initialise))
		must(t, err)
		b, err := os.ReadFile(filepath.Join(out, strconv.Itoa(i)))
		must(t, err)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 || lines[1] != "700" {
			t.Fatalf("call %d saw TMPDIR, its contents, its mode:\n%s\nwant an empty directory of mode 700", i, b)
		}
		dir := lines[0]
		if dir == "" || dir == os.TempDir() {
			t.Errorf("call %d: TMPDIR = %q, want a private directory", i, dir)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("call %d: TMPDIR %s outlived the call (%v)", i, dir, err)
		}
		dirs = append(dirs, dir)
	}
	if dirs[0] == dirs[1] {
		t.Errorf("two calls shared TMPDIR %s", dirs[0])
	}
}
