package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
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
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"push-image": pushImage,
		},
	})
}

// pushImage pushes a small image, one layer holding the file /CONTENT, to the
// registry as REF: push-image REF CONTENT.
func pushImage(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: push-image REF CONTENT")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	ts.Check(tw.WriteHeader(&tar.Header{Name: args[1], Mode: 0o644, Size: int64(len(args[1])), Typeflag: tar.TypeReg}))
	_, err := tw.Write([]byte(args[1]))
	ts.Check(err)
	ts.Check(tw.Close())
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(buf.Bytes(), types.DockerLayer))
	ts.Check(err)
	ref, err := name.ParseReference(args[0])
	ts.Check(err)
	ts.Check(remote.Write(ref, img))
}
