package source_test

import (
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
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/sign"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// pushChart stores a chart archive as `helm push` does, at HOST/REPO:TAG, and
// returns its manifest digest.
func pushChart(t *testing.T, ref string, tgz []byte) string {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, oci.ChartConfigMediaType)
	img, err := mutate.AppendLayers(img, static.NewLayer(tgz, oci.ChartContentMediaType))
	if err != nil {
		t.Fatal(err)
	}
	return write(t, ref, img)
}

func write(t *testing.T, ref string, img v1.Image) string {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// cosignSign attaches a signature of manifest by s as `cosign sign --key`
// stores it: a layer of the image tagged sha256-HEX.sig in repo, its payload
// the simple-signing JSON naming payloadFor.
func cosignSign(t *testing.T, repo, manifest, payloadFor string, s *sign.Signer) {
	t.Helper()
	payload := oci.NewCosignPayload(repo, payloadFor)
	sig, err := s.Sign(bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:       static.NewLayer(payload, oci.CosignPayloadMediaType),
		Annotations: map[string]string{oci.CosignSignatureAnnotation: strings.TrimSpace(string(sig))},
	})
	if err != nil {
		t.Fatal(err)
	}
	write(t, repo+":"+oci.CosignTag(manifest), img)
}

func keyPair(t *testing.T, dir, name string) (*sign.Signer, string) {
	t.Helper()
	kp, err := sign.GenerateKeyPair(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(kp.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(dir, name+".pub")
	if err := os.WriteFile(pub, kp.Public, 0o644); err != nil {
		t.Fatal(err)
	}
	return s, pub
}

// TestChartCosignSignatures: an OCI chart's cosign signature is checked under
// its source's keys; another key's signature, a signature of another manifest,
// and no signature where one is required are refused naming chart, version,
// source and key.
func TestChartCosignSignatures(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	trusted, trustedPub := keyPair(t, dir, "trusted")
	other, _ := keyPair(t, dir, "other")
	trustedKey, err := os.ReadFile(trustedPub)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := sign.LoadPublicKey(trustedPub, trustedKey)
	if err != nil {
		t.Fatal(err)
	}

	chart := func(version string) (repo, manifest string) {
		repo = host + "/charts/web"
		tgz := chartTgz(t, map[string]string{"web/Chart.yaml": "apiVersion: v2\nname: web\nversion: " + version + "\n"})
		return repo, pushChart(t, repo+":"+version, tgz)
	}
	repo, signed := chart("1.0.0")
	cosignSign(t, repo, signed, signed, trusted)
	_, byOther := chart("1.1.0")
	cosignSign(t, repo, byOther, byOther, other)
	_, unsigned := chart("1.2.0")
	_ = unsigned
	_, copied := chart("1.3.0")
	cosignSign(t, repo, copied, signed, trusted) // 1.0.0's payload under 1.3.0's tag

	src := "oci://" + repo
	for _, tc := range []struct {
		name, version string
		required      bool
		want          string // "" accepts
	}{
		{name: "signed by a trusted key", version: "1.0.0", required: true},
		{name: "signed by another key", version: "1.1.0",
			want: "chart web 1.1.0 from " + src + ": no cosign signature in " + src + ":" + oci.CosignTag(byOther) + " verifies with a trusted key (" + trustedPub + " (" + pk.ID + ")): refused"},
		{name: "unsigned, required", version: "1.2.0", required: true,
			want: "chart web 1.2.0 from " + src + " is not signed: the source requires a cosign signature by " + trustedPub + " (" + pk.ID + ")"},
		{name: "unsigned, not required", version: "1.2.0"},
		{name: "signature of another manifest", version: "1.3.0", want: "the signature is of manifest \"" + signed + "\", not of " + copied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &source.ChartFetcher{Cache: &source.Cache{Dir: t.TempDir()}, Options: func(source.ChartRef) (source.HTTPOptions, string) {
				return source.HTTPOptions{SignatureKeys: []string{trustedPub}, SignatureRequired: tc.required}, ""
			}}
			ch, err := f.Fetch(context.Background(), source.ChartRef{Chart: src, Version: tc.version}, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if ch.Version != tc.version {
					t.Fatalf("fetched %s", ch.Version)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant %q", err, tc.want)
			}
		})
	}

	// A pinned chart in the cache is still checked: no offline shortcut past
	// the signature.
	cache := &source.Cache{Dir: t.TempDir()}
	ok := &source.ChartFetcher{Cache: cache}
	ch, err := ok.Fetch(context.Background(), source.ChartRef{Chart: src, Version: "1.1.0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	strict := &source.ChartFetcher{Cache: cache, Options: func(source.ChartRef) (source.HTTPOptions, string) {
		return source.HTTPOptions{SignatureKeys: []string{trustedPub}}, ""
	}}
	if _, err := strict.Fetch(context.Background(), source.ChartRef{Chart: src, Version: "1.1.0"}, &source.ChartPin{Version: "1.1.0", Digest: ch.Digest}); err == nil {
		t.Fatal("a cached chart signed by another key was taken without checking its signature")
	}
}
