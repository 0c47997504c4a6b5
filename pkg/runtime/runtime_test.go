package runtime_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"testing/fstest"

	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/runtime"
	"github.com/kubeplug/kubeplug/pkg/runtime/declarative"
	"github.com/kubeplug/kubeplug/pkg/runtime/exec"
	"github.com/kubeplug/kubeplug/pkg/runtime/grpc"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

func load(t testing.TB, name, spec string) *plugin.Package {
	t.Helper()
	p, l := plugin.Load(fstest.MapFS{
		"plugin.yaml": {Data: []byte("apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: " + name + ", version: 1.0.0}\nspec: " + spec + "\n")},
		"bin/plugin":  {Data: []byte("#!/bin/sh\n"), Mode: 0o755},
	}, plugin.OriginUser, "plugins/"+name)
	if l.HasFatal() {
		t.Fatal(l)
	}
	return p
}

type inProcess struct{}

func (inProcess) Run(context.Context, *stage.Request) (*stage.Response, error) { return nil, nil }

// TestResolverOrder: declarative parts first, then spec.runtime's code, then the
// in-process runtime registered under the plugin's name.
func TestResolverOrder(t *testing.T) {
	r := runtime.NewResolver(runtime.Options{InProcess: map[string]stage.Runtime{"go": inProcess{}, "both": inProcess{}}})
	defer func() { _ = r.Close() }()
	for _, tc := range []struct {
		name, spec, want string
	}{
		{name: "data", spec: "{}", want: "[*declarative.Runtime]"},
		{name: "sh", spec: "{runtime: {type: exec, command: [bin/plugin], sha256: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}}", want: "[*declarative.Runtime *exec.Runtime]"},
		{name: "rpc", spec: "{runtime: {type: grpc, command: [bin/plugin], sha256: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}}", want: "[*declarative.Runtime *grpc.Runtime]"},
		{name: "go", spec: "{}", want: "[*declarative.Runtime runtime_test.inProcess]"},
		{name: "both", spec: "{runtime: {type: exec, command: [bin/plugin], sha256: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}}", want: "[*declarative.Runtime *exec.Runtime runtime_test.inProcess]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rts, err := r.Runtimes(load(t, tc.name, tc.spec), nil)
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, rt := range rts {
				types = append(types, fmt.Sprintf("%T", rt))
			}
			if got := fmt.Sprint(types); got != tc.want {
				t.Errorf("runtimes = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestResolverErrors: a spec.runtime that cannot run is an error naming the
// plugin, which the engine locates. (Loading rejects most such packages; a
// library user may build one by hand.)
func TestResolverErrors(t *testing.T) {
	pkg := load(t, "sh", "{runtime: {type: exec, command: [bin/plugin], sha256: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}}")
	pkg.Manifest.Spec.Runtime.Type = "wasm"
	_, err := runtime.NewResolver(runtime.Options{}).Runtimes(pkg, nil)
	want := `plugin sh: spec.runtime.type: expected exec or grpc, found "wasm"`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

// TestCheckPlan: in-process runtimes for plugins the plan does not run are
// warnings, in name order.
func TestCheckPlan(t *testing.T) {
	r := runtime.NewResolver(runtime.Options{InProcess: map[string]stage.Runtime{"b": inProcess{}, "a": inProcess{}, "used": inProcess{}}})
	want := "warning: an in-process runtime is registered for plugin a, which the cluster does not use\n" +
		"warning: an in-process runtime is registered for plugin b, which the cluster does not use"
	if got := r.CheckPlan([]string{"used", "other"}).String(); got != want {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", got, want)
	}
}

// TestResolverCloseRemovesCopies: closing the resolver removes the private copies
// of the exec runtimes' executables; nothing is left in the temporary directory.
func TestResolverCloseRemovesCopies(t *testing.T) {
	bin := "#!/bin/sh\ncat >/dev/null\necho '{\"protocolVersion\":\"kubeplug.dev/exec/v1\"}'\n"
	sum := sha256.Sum256([]byte(bin))
	pkg, l := plugin.Load(fstest.MapFS{
		"plugin.yaml": {Data: []byte("apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: sh, version: 1.0.0}\n" +
			"spec: {runtime: {type: exec, command: [bin/plugin], sha256: " + hex.EncodeToString(sum[:]) + "}}\n")},
		"bin/plugin": {Data: []byte(bin), Mode: 0o755},
	}, plugin.OriginUser, "plugins/sh")
	if l.HasFatal() {
		t.Fatal(l)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := runtime.NewResolver(runtime.Options{})
	rts, err := r.Runtimes(pkg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := rts[1].Run(context.Background(), &stage.Request{Stage: stage.Initialise, Plugin: "sh"}); err != nil {
			t.Fatal(err)
		}
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 1 {
		t.Errorf("between calls, TMPDIR holds %d entries, want the one copy", len(ents))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("after Close, TMPDIR holds %s", ents[0].Name())
	}
}

var (
	_ stage.Runtime = (*declarative.Runtime)(nil)
	_ stage.Runtime = (*exec.Runtime)(nil)
	_ stage.Runtime = (*grpc.Runtime)(nil)
)
