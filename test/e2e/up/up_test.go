package up

import (
	"context"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"kubeplug": func() {
			// As cmd/kubeplug: Ctrl-C (SIGINT) cancels the run.
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := cmd.Main(ctx, os.Args[1:], cmd.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
			if ctx.Err() != nil && code != 0 {
				code = 130 // as cmd/kubeplug after a SIGINT
			}
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
			// A local cluster outlives the command that started it: when a script
			// fails before its `kubeplug down`, stop what it left running.
			env.Defer(func() { stopClusters(t, env.WorkDir) })
			return nil
		},
	})
}

// stopClusters stops every detached control plane under dir (its state.json says
// which processes are its own).
func stopClusters(t *testing.T, dir string) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != controlplane.StateFile {
			return nil
		}
		dataDir := filepath.Dir(path)
		if running, _ := controlplane.Running(dataDir); running {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := controlplane.StopDetached(ctx, controlplane.Options{DataDir: dataDir}); err != nil {
				t.Errorf("stop the cluster a script left running in %s: %v", dataDir, err)
			}
		}
		return nil
	})
}
