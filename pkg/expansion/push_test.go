package expansion_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubeplug/kubeplug/pkg/expansion"
)

// TestPushResumes pushes an expansion's image straight from its archive to a
// site registry that fails the upload of one blob: the tag is not written, and
// the next push sends only what is missing, then tags the image, which is the
// image packed.
func TestPushResumes(t *testing.T) {
	ctx := context.Background()
	src := startRegistry(t)
	img, err := random.Image(1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	ref := src + "/team/app:v1"
	if err := remote.Write(mustRef(t, ref), img); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	layers, _ := img.Layers()
	failDigest, _ := layers[1].Digest()

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"src/expansion.yaml": "apiVersion: kubeplug.dev/v1alpha1\nkind: Expansion\nmetadata: {name: site, version: 1.0.0}\nspec:\n  images: [" + ref + "]\n"})
	archive := filepath.Join(dir, "site.tar")
	if _, l := expansion.Create(ctx, filepath.Join(dir, "src"), archive, expansion.CreateOptions{}); l.HasFatal() {
		t.Fatal(l)
	}

	var mu sync.Mutex
	uploads := map[string]int{} // completed blob uploads by digest
	failing := true
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := r.URL.Query().Get("digest")
		if r.Method == http.MethodPut && d != "" {
			mu.Lock()
			fail := failing && d == failDigest.String()
			if !fail {
				uploads[d]++
			}
			mu.Unlock()
			if fail {
				http.Error(w, "disk full", http.StatusInsufficientStorage) // not retried
				return
			}
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(site.Close)
	host := strings.TrimPrefix(site.URL, "http://")

	ld, l := expansion.Load(ctx, archive, expansion.UseOptions{WorkDir: t.TempDir()})
	if l.HasFatal() {
		t.Fatal(l)
	}
	_, err = ld.PushImages(ctx, host, expansion.PushOptions{Insecure: true})
	if err == nil || !strings.Contains(err.Error(), "push image "+ref+" of expansion site@1.0.0") {
		t.Fatalf("a failing registry: %v", err)
	}
	if _, err := remote.Head(mustRef(t, host+"/team/app:v1")); err == nil {
		t.Fatal("the image is tagged although one of its blobs is missing")
	}
	mu.Lock()
	failing = false
	before := len(uploads)
	mu.Unlock()
	if before == 0 {
		t.Fatal("nothing was uploaded before the failure")
	}
	pushed, err := ld.PushImages(ctx, host, expansion.PushOptions{Insecure: true})
	if err != nil || len(pushed) != 1 || pushed[0] != host+"/team/app:v1" {
		t.Fatalf("resume: %v %v", pushed, err)
	}
	for d, n := range uploads {
		if n != 1 {
			t.Errorf("blob %s uploaded %d times", d, n)
		}
	}
	desc, err := remote.Get(mustRef(t, host+"/team/app:v1"))
	if err != nil || desc.Digest != want {
		t.Fatalf("site has %v (%v), want %s", desc, err, want)
	}
	// Pushing again sends nothing.
	n := len(uploads)
	if _, err := ld.PushImages(ctx, host, expansion.PushOptions{Insecure: true}); err != nil || len(uploads) != n {
		t.Fatalf("a third push uploaded %d blobs (%v)", len(uploads)-n, err)
	}
}

func mustRef(t testing.TB, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPushCharts pushes a chart directory of an expansion as an OCI chart: Helm's
// media types, the chart packed under its name, the same manifest every time.
func TestPushCharts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"src/expansion.yaml":               "apiVersion: kubeplug.dev/v1alpha1\nkind: Expansion\nmetadata: {name: site, version: 1.0.0}\nspec:\n  charts: [{name: web, path: charts/web}]\n",
		"src/charts/web/Chart.yaml":        "apiVersion: v2\nname: web\nversion: 1.2.3\n",
		"src/charts/web/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
		"src/charts/web/values.yaml":       "replicas: 1\n",
	})
	archive := filepath.Join(dir, "site.tar")
	if _, l := expansion.Create(ctx, filepath.Join(dir, "src"), archive, expansion.CreateOptions{}); l.HasFatal() {
		t.Fatal(l)
	}
	host := startRegistry(t)
	ld, l := expansion.Load(ctx, archive, expansion.UseOptions{WorkDir: t.TempDir()})
	if l.HasFatal() {
		t.Fatal(l)
	}
	var first string
	for range 2 {
		pushed, err := ld.PushCharts(ctx, host, expansion.PushOptions{Insecure: true})
		if err != nil || len(pushed) != 1 || pushed[0] != host+"/charts/web:1.2.3" {
			t.Fatalf("pushed %v (%v)", pushed, err)
		}
		desc, err := remote.Get(mustRef(t, pushed[0]))
		if err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = desc.Digest.String()
		} else if desc.Digest.String() != first {
			t.Fatalf("a second push made manifest %s, not %s", desc.Digest, first)
		}
		m, err := desc.Image()
		if err != nil {
			t.Fatal(err)
		}
		mf, err := m.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if mf.Config.MediaType != expansion.ChartConfigMediaType || len(mf.Layers) != 1 || mf.Layers[0].MediaType != expansion.ChartContentMediaType {
			t.Fatalf("manifest %+v", mf)
		}
		layers, err := m.Layers()
		if err != nil {
			t.Fatal(err)
		}
		rc, err := layers[0].Compressed()
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(rc)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			names = append(names, h.Name)
		}
		_ = rc.Close()
		if strings.Join(names, ",") != "web/Chart.yaml,web/templates/cm.yaml,web/values.yaml" {
			t.Fatalf("chart archive holds %v", names)
		}
	}
}
