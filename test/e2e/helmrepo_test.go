package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/rogpeppe/go-internal/testscript"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	helmregistry "helm.sh/helm/v4/pkg/registry"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/sign"
)

// helmRepo serves chart directories as a Helm repository on loopback, packaged
// and indexed by the Helm SDK as `helm package` and `helm repo index` do:
// "helm-repo SRC OUT" packages every chart directory under SRC into OUT, writes
// OUT/index.yaml and serves OUT, setting $HELMREPO to its URL until the script
// ends; a chart dependency whose repository is HELMREPO gets that URL. Files
// put into OUT afterwards (a tampered archive) are served as they are.
func helmRepo(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: helm-repo SRC OUT")
	}
	src, out := ts.MkAbs(args[0]), ts.MkAbs(args[1])
	ts.Check(os.MkdirAll(out, 0o755))
	srv := httptest.NewServer(http.FileServer(http.Dir(out)))
	ts.Defer(srv.Close)
	dirs, err := os.ReadDir(src)
	ts.Check(err)
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		c, err := loader.LoadDir(filepath.Join(src, d.Name()))
		ts.Check(err)
		// A dependency on the repository itself names it HELMREPO.
		for _, dep := range c.Metadata.Dependencies {
			if dep.Repository == "HELMREPO" {
				dep.Repository = srv.URL
			}
		}
		_, err = chartutil.Save(c, out)
		ts.Check(err)
	}
	idx, err := repo.IndexDirectory(out, srv.URL)
	ts.Check(err)
	idx.SortEntries()
	ts.Check(idx.WriteFile(filepath.Join(out, "index.yaml"), 0o644))
	ts.Setenv("HELMREPO", srv.URL)
}

// helmPush packages every chart directory under SRC and pushes it to the
// script's registry as `helm push` does: "helm-push SRC" stores chart NAME at
// VERSION as $REGISTRY/charts/NAME:VERSION.
func helmPush(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: helm-push SRC")
	}
	src := ts.MkAbs(args[0])
	c, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptWriter(io.Discard),
		helmregistry.ClientOptCredentialsFile(filepath.Join(ts.Getenv("WORK"), ".helm-registry.json")))
	ts.Check(err)
	dirs, err := os.ReadDir(src)
	ts.Check(err)
	out := ts.MkAbs(".helm-push")
	ts.Check(os.MkdirAll(out, 0o755))
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		ch, err := loader.LoadDir(filepath.Join(src, d.Name()))
		ts.Check(err)
		tgz, err := chartutil.Save(ch, out)
		ts.Check(err)
		data, err := os.ReadFile(tgz)
		ts.Check(err)
		_, err = c.Push(data, ts.Getenv("REGISTRY")+"/charts/"+ch.Name()+":"+ch.Metadata.Version)
		ts.Check(err)
	}
}

// cosignSign signs a chart in the script's registry as `cosign sign --key
// KEY --tlog-upload=false` does: "cosign-sign KEY REPO:TAG" stores a
// simple-signing payload naming the manifest's digest, signed with the PEM
// private key KEY (from kubeplug plugin keygen --no-password, cosign's key
// format), as a layer of the image tagged sha256-HEX.sig in REPO.
func cosignSign(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: cosign-sign KEY REPO:TAG")
	}
	key, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	s, err := sign.LoadSigner(key, nil)
	ts.Check(err)
	ref, err := name.ParseReference(args[1], name.Insecure)
	ts.Check(err)
	desc, err := remote.Head(ref)
	ts.Check(err)
	repo := ref.Context().Name()
	payload := oci.NewCosignPayload(repo, desc.Digest.String())
	sig, err := s.Sign(bytes.NewReader(payload))
	ts.Check(err)
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:       static.NewLayer(payload, oci.CosignPayloadMediaType),
		Annotations: map[string]string{oci.CosignSignatureAnnotation: strings.TrimSpace(string(sig))},
	})
	ts.Check(err)
	tag, err := name.ParseReference(repo+":"+oci.CosignTag(desc.Digest.String()), name.Insecure)
	ts.Check(err)
	ts.Check(remote.Write(tag, img))
}
