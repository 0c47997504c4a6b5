package grpc_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime/grpc"
	"github.com/kubeplug/kubeplug/pkg/runtime/wire"
	"github.com/kubeplug/kubeplug/pkg/stage"
	"github.com/kubeplug/kubeplug/sdk"
)

// The test binary doubles as the plugin (the helper-process pattern): run with
// KUBEPLUG_TEST_PLUGIN set, it serves the named behaviour instead of testing.
func TestMain(m *testing.M) {
	if mode := os.Getenv("KUBEPLUG_TEST_PLUGIN"); mode != "" {
		serve(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type helper struct{ mode string }

func (h helper) Initialise(ctx context.Context, _ *sdk.Request) (*sdk.Response, error) {
	switch h.mode {
	case "crash":
		panic("about to crash")
	case "hang":
		fmt.Fprintln(os.Stderr, "thinking hard")
		// Not bound to ctx: only the host's kill of the process group may end it.
		_ = osexec.Command("sleep", "3021").Start() //nolint:noctx // see above
		<-make(chan struct{})
	case "error":
		return nil, errors.New("cannot reach the vault")
	}
	return pidResponse(), nil
}

func (helper) Render(context.Context, *sdk.Request) (*sdk.Response, error) { return pidResponse(), nil }

func pidResponse() *sdk.Response {
	return &sdk.Response{Contribution: &model.Contribution{Cloud: &model.Cloud{
		Outputs: map[string]model.Setting[any]{"pid": {Value: strconv.Itoa(os.Getpid())}},
	}}}
}

// skewed reports another SDK version, or garbage, around the real handler.
type skewed struct {
	wire.Handler
	version string
	garbage bool
}

func (s skewed) Info(ctx context.Context) (*wire.Info, error) {
	info, err := s.Handler.Info(ctx)
	if err == nil && s.version != "" {
		info.SDKVersion = s.version
	}
	return info, err
}

func (s skewed) Stage(ctx context.Context, st stage.Stage, req []byte) ([]byte, error) {
	if s.garbage {
		return []byte("I am not JSON"), nil
	}
	return s.Handler.Stage(ctx, st, req)
}

func serve(mode string) {
	h, err := sdk.Handler(helper{mode: mode})
	if err != nil {
		panic(err)
	}
	switch mode {
	case "newsdk":
		h = skewed{Handler: h, version: "9.0.0"}
	case "garbage":
		h = skewed{Handler: h, garbage: true}
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{wire.ProtocolVersion: {wire.PluginName: &wire.Plugin{Handler: h}}},
		GRPCServer:       goplugin.DefaultGRPCServer,
		Logger:           sdk.ServeLogger(),
	})
}

// helperPackage returns a package whose executable is a copy of the test binary.
func helperPackage(t testing.TB) *plugin.Package {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "plugin"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return &plugin.Package{
		Name: "helper", FS: os.DirFS(dir), Location: dir,
		Manifest: &v1alpha1.Plugin{Spec: v1alpha1.PluginSpec{Runtime: &v1alpha1.Runtime{
			Type: v1alpha1.RuntimeGRPC, Command: []string{"plugin"}, SHA256: hex.EncodeToString(sum[:]),
		}}},
	}
}

func newRuntime(t testing.TB, mode string, timeout time.Duration) *grpc.Runtime {
	t.Helper()
	rt, err := grpc.New(helperPackage(t), grpc.Options{Env: []string{"KUBEPLUG_TEST_PLUGIN=" + mode}, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

func request(st stage.Stage) *stage.Request {
	return &stage.Request{Stage: st, Plugin: "helper", Version: "1.0.0", Model: model.New()}
}

func pid(t testing.TB, resp *stage.Response) int {
	t.Helper()
	if resp == nil || resp.Contribution == nil {
		t.Fatalf("response %+v has no pid", resp)
	}
	n, err := strconv.Atoi(resp.Contribution.Cloud.Outputs["pid"].Value.(string))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOneProcessServesEveryStage(t *testing.T) {
	rt := newRuntime(t, "ok", 0)
	ctx := t.Context()
	r1, err := rt.Run(ctx, request(stage.Initialise))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rt.Run(ctx, request(stage.Render))
	if err != nil {
		t.Fatal(err)
	}
	if pid(t, r1) != pid(t, r2) {
		t.Errorf("initialise ran in %d, render in %d: want one process", pid(t, r1), pid(t, r2))
	}
	if resp, err := rt.Run(ctx, request(stage.Deploy)); err != nil || resp != nil {
		t.Errorf("unimplemented deploy = %+v, %v; want nil, nil", resp, err)
	}
	p := pid(t, r1)
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(p) {
		t.Errorf("plugin %d survived Close", p)
	}
	// A closed runtime starts afresh.
	r3, err := rt.Run(ctx, request(stage.Initialise))
	if err != nil {
		t.Fatal(err)
	}
	if pid(t, r3) == p {
		t.Errorf("no new process after Close")
	}
}

func TestContextEndKillsTheProcess(t *testing.T) {
	rt := newRuntime(t, "ok", 0)
	ctx, cancel := context.WithCancel(t.Context())
	resp, err := rt.Run(ctx, request(stage.Initialise))
	if err != nil {
		t.Fatal(err)
	}
	p := pid(t, resp)
	cancel()
	for i := 0; alive(p) && i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(p) {
		t.Errorf("plugin %d outlived its context", p)
	}
}

func TestFailuresAreIsolated(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		timeout time.Duration
		is      error
		want    []string
		marker  string
	}{
		{mode: "crash", is: grpc.ErrExit, want: []string{"plugin exited during initialise", "panic: about to crash"}},
		{mode: "hang", timeout: time.Second, is: grpc.ErrTimeout,
			want: []string{"plugin did not answer initialise within 1s and was killed", "thinking hard"}, marker: "3021"},
		{mode: "error", is: grpc.ErrPlugin, want: []string{"plugin returned an error: initialise: cannot reach the vault"}},
		{mode: "garbage", is: grpc.ErrProtocol, want: []string{"response is not a valid kubeplug.dev/exec/v1 message"}},
		{mode: "newsdk", is: grpc.ErrSDKVersion, want: []string{"the plugin was built with SDK 9.0.0; this host supports >= 0.1.0, < 1.0.0"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			rt := newRuntime(t, tc.mode, tc.timeout)
			resp, err := rt.Run(t.Context(), request(stage.Initialise))
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
			if tc.marker != "" {
				for i := 0; i < 100 && sleeping(tc.marker); i++ {
					time.Sleep(20 * time.Millisecond)
				}
				if sleeping(tc.marker) {
					t.Errorf("the plugin's child outlived the timeout")
				}
			}
		})
	}
}

func TestDigestMismatchRefusesToStart(t *testing.T) {
	pkg := helperPackage(t)
	if err := os.WriteFile(filepath.Join(pkg.Location, "plugin"), []byte("#!/bin/sh\ntouch pwned\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rt, err := grpc.New(pkg, grpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Run(t.Context(), request(stage.Initialise))
	var de *grpc.DigestError
	if !errors.As(err, &de) || de.Expected != pkg.Manifest.Spec.Runtime.SHA256 {
		t.Fatalf("error = %v, want a digest mismatch", err)
	}
	if _, err := os.Stat(filepath.Join(pkg.Location, "pwned")); err == nil {
		t.Errorf("the swapped executable ran")
	}
}

func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(stat), ") Z ")
}

func sleeping(arg string) bool {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && string(b) == "sleep\x00"+arg+"\x00" {
			if n, err := strconv.Atoi(d.Name()); err == nil && alive(n) {
				return true
			}
		}
	}
	return false
}
