package bench

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BenchmarkExpansion packs an expansion whose image holds
// $KUBEPLUG_BENCH_EXPANSION_MB (default 2048) MiB of incompressible layers,
// pulled from a loopback registry, then pushes it to another, each by the
// kubeplug binary in its own process, and reports each one's time and peak
// memory (max RSS) against cp of the same bytes, the physical limit here:
//
//	go test -run '^$' -bench BenchmarkExpansion -benchtime 1x -timeout 30m ./test/bench
func BenchmarkExpansion(b *testing.B) {
	mb := 2048
	if v := os.Getenv("KUBEPLUG_BENCH_EXPANSION_MB"); v != "" {
		var err error
		if mb, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "kubeplug")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/kubeplug").CombinedOutput(); err != nil {
		b.Fatalf("build kubeplug: %v\n%s", err, out)
	}
	src, srcBlobs := diskRegistry(b, dir, "source")
	site, _ := diskRegistry(b, dir, "site")

	// The image: layers of 256 MiB of random bytes, uncompressed.
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	const layerMB = 256
	for i := 0; i < mb; i += layerMB {
		buf := make([]byte, layerMB<<20)
		if _, err := rand.Read(buf); err != nil {
			b.Fatal(err)
		}
		var err error
		if img, err = mutate.AppendLayers(img, static.NewLayer(buf, types.OCIUncompressedLayer)); err != nil {
			b.Fatal(err)
		}
		ref, _ := name.ParseReference(fmt.Sprintf("%s/bench/big:v1", src))
		if err := remote.Write(ref, img); err != nil { // layer by layer, to bound this process's memory
			b.Fatal(err)
		}
	}
	srcDir := filepath.Join(dir, "src")
	if err := os.MkdirAll(srcDir, 0o755); err != nil {
		b.Fatal(err)
	}
	manifest := fmt.Sprintf("apiVersion: kubeplug.dev/v1alpha1\nkind: Expansion\nmetadata: {name: bench, version: 1.0.0}\nspec:\n  images: [%s/bench/big:v1]\n", src)
	if err := os.WriteFile(filepath.Join(srcDir, "expansion.yaml"), []byte(manifest), 0o644); err != nil {
		b.Fatal(err)
	}
	archive := filepath.Join(dir, "site.tar")
	b.ResetTimer()
	for range b.N {
		_ = os.Remove(archive)
		createT, createRSS := measure(b, bin, "expansion", "create", "-f", filepath.Join(srcDir, "expansion.yaml"), "-o", archive)
		pushT, pushRSS := measure(b, bin, "expansion", "push", "--plain-http", archive, site)
		// The physical limit: copying the same bytes (the source registry's blobs).
		start := time.Now()
		if out, err := exec.Command("cp", "-r", srcBlobs, filepath.Join(dir, "copy")).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
		cpT := time.Since(start)
		_ = os.RemoveAll(filepath.Join(dir, "copy"))
		fi, err := os.Stat(archive)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(fi.Size())/(1<<20), "archive-MiB")
		b.ReportMetric(createT.Seconds(), "create-s")
		b.ReportMetric(float64(createRSS)/(1<<10), "create-maxrss-MiB")
		b.ReportMetric(pushT.Seconds(), "push-s")
		b.ReportMetric(float64(pushRSS)/(1<<10), "push-maxrss-MiB")
		b.ReportMetric(cpT.Seconds(), "cp-s")
		b.ReportMetric(createT.Seconds()/cpT.Seconds(), "create/cp")
		b.ReportMetric(pushT.Seconds()/cpT.Seconds(), "push/cp")
	}
}

// diskRegistry runs a registry on loopback that keeps its blobs on disk under
// dir/name, and returns its host:port and blob directory.
func diskRegistry(b *testing.B, dir, name string) (string, string) {
	blobs := filepath.Join(dir, name)
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(blobs)), registry.Logger(log.New(io.Discard, "", 0))))
	b.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), blobs
}

// measure runs the kubeplug binary under /usr/bin/time and returns its wall time
// and max RSS (KiB). A direct child's max RSS would count this process's pages
// until it execs; time's child is forked from time, which is small.
func measure(b *testing.B, bin string, args ...string) (time.Duration, int64) {
	var out bytes.Buffer
	rss := filepath.Join(b.TempDir(), "rss")
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", rss, bin}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+b.TempDir())
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("kubeplug %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	d := time.Since(start)
	data, err := os.ReadFile(rss)
	if err != nil {
		b.Fatal(err)
	}
	kib, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		b.Fatalf("/usr/bin/time wrote %q: %v", data, err)
	}
	return d, kib
}
