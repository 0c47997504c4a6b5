package up

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/kubeplug/kubeplug/internal/cli"
	"github.com/kubeplug/kubeplug/internal/controlplane"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"kubeplug": func() {
			// As cmd/kubeplug: Ctrl-C (SIGINT) cancels the run.
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := cli.Main(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
			stop()
			os.Exit(code)
		},
	})
}

// TestUp runs the scripts in testdata: each brings its own local cluster up in its
// work directory, with kubectl from the local control plane build on PATH and a
// kubeconfig of its own.
func TestUp(t *testing.T) {
	bin, err := controlplane.FindBinDir("")
	if err != nil {
		t.Fatalf("the local control plane is not built (make localcluster): %v", err)
	}
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata",
		Setup: func(env *testscript.Env) error {
			env.Setenv("KUBEPLUG_LOCALCLUSTER_BIN", bin)
			env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("KUBECONFIG", filepath.Join(env.WorkDir, "home", ".kube", "config"))
			env.Setenv("XDG_STATE_HOME", filepath.Join(env.WorkDir, "home", ".local", "state"))
			env.Setenv("REPO", repo)
			return nil
		},
	})
}
