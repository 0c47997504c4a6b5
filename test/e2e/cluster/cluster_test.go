package cluster

import (
	"context"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// withCluster starts the shared control plane around the tests, and only then: the
// kubeplug command that scripts run is this binary too, and must not start one.
type withCluster struct{ m *testing.M }

func (w withCluster) Run() int { return testcluster.Run(w.m) }

func TestMain(m *testing.M) {
	testscript.Main(withCluster{m}, map[string]func(){
		"kubeplug": func() {
			os.Exit(cmd.Main(context.Background(), os.Args[1:], cmd.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
		},
	})
}

func TestCluster(t *testing.T) {
	kubeconfig := testcluster.ControlPlane(t).KubeconfigPath()
	testscript.Run(t, testscript.Params{
		Dir: "testdata",
		Setup: func(env *testscript.Env) error {
			env.Setenv("KUBECONFIG", kubeconfig)
			return nil
		},
	})
}
