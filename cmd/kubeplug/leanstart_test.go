package main

import (
	"bytes"
	"context"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/cmd/kubeplug/internal/leanstart"
	"github.com/kubeplug/kubeplug/internal/buildversion"
	"github.com/kubeplug/kubeplug/pkg/cmd"
)

var update = flag.Bool("update", false, "rewrite the lean start's help snapshot from the whole CLI's --help")

// leanArgs are the command lines the lean start answers.
var leanArgs = [][]string{{"--help"}, {"-h"}, {"help"}, {"version"}}

// noContribDir is the environment of a run without $KUBEPLUG_CONTRIB_DIR.
func noContribDir(t *testing.T) {
	t.Helper()
	if v, ok := os.LookupEnv("KUBEPLUG_CONTRIB_DIR"); ok {
		if err := os.Unsetenv("KUBEPLUG_CONTRIB_DIR"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Setenv("KUBEPLUG_CONTRIB_DIR", v) })
	}
}

// stampVersion sets the link-time version for the test, as make build does.
func stampVersion(t *testing.T) {
	t.Helper()
	old := buildversion.Version
	buildversion.Version = "v0.0.0-leanstart-test"
	t.Cleanup(func() { buildversion.Version = old })
}

func wholeCLI(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := cmd.Main(context.Background(), args, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &errb}); code != 0 {
		t.Fatalf("kubeplug %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.String()
}

// TestLeanStartAnswersAsTheWholeCLI holds the lean start's answers to what the
// whole CLI prints for the same command lines: the help snapshot is current
// (rewrite it with -update after changing a verb or a global flag).
func TestLeanStartAnswersAsTheWholeCLI(t *testing.T) {
	noContribDir(t)
	if *update {
		if err := os.WriteFile(filepath.Join("internal", "leanstart", leanstart.HelpFile), []byte(wholeCLI(t, "--help")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("rewrote the help snapshot; run the test again, without -update, to check it")
		return
	}
	stampVersion(t)
	if leanstart.APIVersion != v1alpha1.GroupVersion {
		t.Errorf("leanstart.APIVersion = %q, api/v1alpha1.GroupVersion = %q", leanstart.APIVersion, v1alpha1.GroupVersion)
	}
	for _, args := range leanArgs {
		got, ok := leanstart.Answer(args, os.LookupEnv)
		if !ok {
			t.Errorf("lean start does not answer %q", args)
			continue
		}
		if want := wholeCLI(t, args...); got != want {
			t.Errorf("lean start's answer to %q differs from the whole CLI's (go test ./cmd/kubeplug -run %s -update rewrites the snapshot):\n--- lean\n%s\n--- whole\n%s", args, t.Name(), got, want)
		}
	}
}

// TestLeanStartLeavesTheRestToTheWholeCLI: anything but the exact lean command
// lines, and help when $KUBEPLUG_CONTRIB_DIR would change it, is the whole CLI's.
func TestLeanStartLeavesTheRestToTheWholeCLI(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{nil, {"version", "-o", "json"}, {"-o", "json", "version"}, {"plan", "--help"}, {"help", "plan"}, {"--version"}, {"versions"}} {
		if _, ok := leanstart.Answer(args, none); ok {
			t.Errorf("lean start answers %q; the whole CLI should", args)
		}
	}
	if buildversion.Version == "" {
		if _, ok := leanstart.Answer([]string{"version"}, none); ok {
			t.Error("lean start answers version without a stamped version; the whole CLI reads the build info")
		}
	}
	stampVersion(t)
	contrib := func(k string) (string, bool) { return "/contrib", k == "KUBEPLUG_CONTRIB_DIR" }
	if _, ok := leanstart.Answer([]string{"--help"}, contrib); ok {
		t.Error("lean start answers --help with $KUBEPLUG_CONTRIB_DIR set, whose value --help shows")
	}
	if _, ok := leanstart.Answer([]string{"version"}, contrib); !ok {
		t.Error("lean start leaves version to the whole CLI with $KUBEPLUG_CONTRIB_DIR set; version does not show it")
	}
}

// heavyInit are the packages whose initialisation made most of the CLI's start
// (issue 42; GODEBUG=inittrace=1 kubeplug version, the medians of 7 runs: the
// JSON Schema compiler's meta-schemas 10 ms and 1.7 MB, client-go's scheme
// 6.5 ms, govalidator's regexps 6 ms, controller-runtime's and kubectl's
// schemes and metrics 2 ms each, Helm, oras, the etcd server) and kubeplug's
// own engine: `kubeplug --help` and `version` must initialise none of them.
var heavyInit = regexp.MustCompile(`^(github\.com/santhosh-tekuri/jsonschema/v6|k8s\.io/client-go/kubernetes/scheme|github\.com/asaskevich/govalidator|sigs\.k8s\.io/controller-runtime/pkg/client/apiutil|k8s\.io/kubectl/pkg/scheme|sigs\.k8s\.io/controller-runtime/pkg/internal/controller/metrics|k8s\.io/api/core/v1|oras\.land/oras-go/v2|helm\.sh/helm/v4/pkg/chart/common|go\.etcd\.io/etcd/server/v3/etcdserver|github\.com/kubeplug/kubeplug/(pkg|api|sdk)/.*)$`)

// TestLeanStartInitialisesNoHeavyPackage runs this test binary, which links what
// kubeplug links, as `kubeplug --help` and `kubeplug version` with the
// runtime's init trace, and fails on a heavy package initialised before the
// answer. No timing: the list of initialised packages is the measure.
func TestLeanStartInitialisesNoHeavyPackage(t *testing.T) {
	noContribDir(t)
	// This test binary links leanstart through this test too: hold that the
	// kubeplug binary itself imports it.
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(f.Imports, func(s *ast.ImportSpec) bool {
		return s.Path.Value == `"github.com/kubeplug/kubeplug/cmd/kubeplug/internal/leanstart"`
	}) {
		t.Fatal("main.go does not import leanstart: kubeplug would initialise every package before --help and version")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range leanArgs {
		if args[0] == "version" && buildversion.Version == "" {
			// This test binary has no stamped version, so version is the whole
			// CLI's here; BenchmarkStart (make bench) runs a stamped build.
			continue
		}
		c := exec.Command(self, args...)
		c.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		if err := c.Run(); err != nil {
			t.Fatalf("%q: %v: %s", args, err, errb.String())
		}
		want, _ := leanstart.Answer(args, os.LookupEnv)
		if out.String() != want {
			t.Errorf("%q printed %q, want %q", args, out.String(), want)
		}
		var inited, heavy []string
		for _, line := range strings.Split(errb.String(), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "init" {
				continue
			}
			inited = append(inited, f[1])
			if heavyInit.MatchString(f[1]) {
				heavy = append(heavy, f[1])
			}
		}
		if len(inited) == 0 {
			t.Fatalf("%q: no init trace on stderr: %s", args, errb.String())
		}
		if len(heavy) > 0 {
			t.Errorf("%q initialised %d heavy packages before answering: %s", args, len(heavy), strings.Join(heavy, ", "))
		}
		t.Logf("%q: %d packages initialised", args, len(inited))
	}
}
