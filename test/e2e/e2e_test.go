package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/kubeplug/kubeplug/pkg/cmd"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"kubeplug": func() {
			os.Exit(cmd.Main(context.Background(), os.Args[1:], cmd.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
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
			// HTTPFILES serves the script's www/ directory on loopback
			// (node files downloaded from a URL), stopped when the script ends.
			www := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(env.WorkDir, "www"))))
			env.Defer(www.Close)
			env.Setenv("HTTPFILES", www.URL)
			return nil
		},
		Condition: func(cond string) (bool, error) {
			if cond == "registry" { // make registry's binary is built (make localnode)
				_, err := os.Stat(registryBin(repo))
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"push-image":  pushImage,
			"docker-save": dockerSave,
			"helm-repo":   helmRepo,
			"helm-push":   helmPush,
			"cosign-sign": cosignSign,
			"registry":    func(ts *testscript.TestScript, neg bool, args []string) { localRegistry(ts, neg, args, repo) },
			"decoy-api":   decoyAPIServer,
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

// dockerSave writes what `docker save REF -o FILE` writes for a small image,
// one layer holding the file /CONTENT: docker-save REF CONTENT FILE. With
// "! docker-save" the archive is damaged: its layer's bytes changed.
func dockerSave(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: [!] docker-save REF CONTENT FILE")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	ts.Check(tw.WriteHeader(&tar.Header{Name: args[1], Mode: 0o644, Size: int64(len(args[1])), Typeflag: tar.TypeReg}))
	_, err := tw.Write([]byte(args[1]))
	ts.Check(err)
	ts.Check(tw.Close())
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(buf.Bytes(), types.DockerLayer))
	ts.Check(err)
	tag, err := name.NewTag(args[0])
	ts.Check(err)
	if neg {
		// The layer's bytes are changed after its digest and diff ID are fixed.
		bad := bytes.ReplaceAll(buf.Bytes(), []byte(args[1]), []byte(strings.ToUpper(args[1])))
		img, err = mutate.AppendLayers(empty.Image, &swapped{static.NewLayer(buf.Bytes(), types.DockerLayer), bad})
		ts.Check(err)
	}
	ts.Check(tarball.WriteToFile(ts.MkAbs(args[2]), tag, img))
}

// decoyAPIServer starts a second API server for a script, standing for the
// cluster of the user's own kubeconfig: it answers every request with a
// Namespace list and appends "METHOD PATH" to FILE, so a script can tell
// whether anything reached it. Its URL is $DECOY; it stops when the script
// ends. Usage: decoy-api FILE.
func decoyAPIServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: decoy-api FILE")
	}
	hits := ts.MkAbs(args[0])
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if f, err := os.OpenFile(hits, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			_, _ = fmt.Fprintf(f, "%s %s\n", r.Method, r.URL.Path)
			_ = f.Close()
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"NamespaceList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"the-users-cluster"}}]}`)
	}))
	ts.Defer(srv.Close)
	ts.Setenv("DECOY", srv.URL)
}

// swapped is a layer whose content is not what its digests say.
type swapped struct {
	v1.Layer
	content []byte
}

func (s *swapped) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(s.content)), nil
}

func (s *swapped) Uncompressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(s.content)), nil
}

// registryBin is kubeplug-registry as make localnode and make registry build it.
func registryBin(repo string) string {
	dir := os.Getenv("KUBEPLUG_LOCALNODE_BIN")
	if dir == "" {
		dir = filepath.Join(repo, "_output", "localnode", "bin")
	}
	return filepath.Join(dir, "kubeplug-registry")
}

// registries are the registries scripts started, by script.
var registries sync.Map

// localRegistry runs the registry of make registry as the docs say:
// "registry start DIR" serves DIR on a free loopback port, sets $LOCALREG to
// its address and stops it when the script ends; "registry stop" stops it.
func localRegistry(ts *testscript.TestScript, neg bool, args []string, repo string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: registry start DIR | registry stop")
	}
	switch args[0] {
	case "stop":
		if c, ok := registries.LoadAndDelete(ts); ok {
			_ = c.(*exec.Cmd).Process.Kill()
			_ = c.(*exec.Cmd).Wait()
		}
	case "start":
		if len(args) != 2 {
			ts.Fatalf("usage: registry start DIR")
		}
		cmd := exec.Command(registryBin(repo), "--listen", "127.0.0.1:0", "--dir", ts.MkAbs(args[1])) //nolint:gosec // the test's own binary
		out, err := cmd.StdoutPipe()
		ts.Check(err)
		ts.Check(cmd.Start())
		ts.Defer(func() {
			if _, ok := registries.LoadAndDelete(ts); ok {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		line, err := bufio.NewReader(out).ReadString('\n')
		ts.Check(err)
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "serving on ")
		if !ok {
			ts.Fatalf("kubeplug-registry said %q", line)
		}
		ts.Setenv("LOCALREG", addr)
		registries.Store(ts, cmd)
	default:
		ts.Fatalf("usage: registry start DIR | registry stop")
	}
}
