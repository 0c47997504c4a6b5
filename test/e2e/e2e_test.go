package e2e

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/kubeplug/kubeplug/internal/cli"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"kubeplug": func() {
			os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
		},
	})
}

func TestCLI(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata",
		Setup: func(env *testscript.Env) error {
			env.Setenv("REPO", repo)
			// plugin test --cluster starts the local control plane built by make.
			if bin := os.Getenv("KUBEPLUG_LOCALCLUSTER_BIN"); bin != "" {
				env.Setenv("KUBEPLUG_LOCALCLUSTER_BIN", bin)
			} else {
				env.Setenv("KUBEPLUG_LOCALCLUSTER_BIN", filepath.Join(repo, "_output", "localcluster", "bin"))
			}
			// REGISTRY is an in-process OCI registry on loopback (the real
			// distribution API), one per script, stopped when the script ends.
			srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
			env.Defer(srv.Close)
			env.Setenv("REGISTRY", strings.TrimPrefix(srv.URL, "http://"))
			return nil
		},
	})
}
