package cluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

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
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"secret-data": secretData(testcluster.RESTConfig(t)),
		},
	})
}

// secretData writes the data of a Secret or ConfigMap in the cluster to a file,
// one "key: value" line per key in order, decoded: "secret-data NS NAME FILE".
func secretData(cfg *rest.Config) func(ts *testscript.TestScript, neg bool, args []string) {
	return func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 3 {
			ts.Fatalf("usage: secret-data NS NAME FILE")
		}
		cs, err := kubernetes.NewForConfig(cfg)
		ts.Check(err)
		data := map[string]string{}
		ctx := context.Background()
		if sec, err := cs.CoreV1().Secrets(args[0]).Get(ctx, args[1], metav1.GetOptions{}); err == nil {
			for k, v := range sec.Data {
				data[k] = string(v)
			}
		} else {
			cm, err2 := cs.CoreV1().ConfigMaps(args[0]).Get(ctx, args[1], metav1.GetOptions{})
			if err2 != nil {
				ts.Fatalf("no Secret or ConfigMap %s/%s: %v; %v", args[0], args[1], err, err2)
			}
			maps.Copy(data, cm.Data)
		}
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(data)) {
			fmt.Fprintf(&b, "%s: %s\n", k, data[k])
		}
		ts.Check(os.WriteFile(ts.MkAbs(args[2]), []byte(b.String()), 0o600))
	}
}
