package expansion_test

import (
	"context"
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
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubeplug/kubeplug/pkg/expansion"
)

// pushHelperEnv makes the test binary a helper process that pushes the
// expansion $KUBEPLUG_PUSH_ARCHIVE to $KUBEPLUG_PUSH_HOST and exits.
const pushHelperEnv = "KUBEPLUG_PUSH_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(pushHelperEnv) != "" {
		ld, l := expansion.Load(context.Background(), os.Getenv("KUBEPLUG_PUSH_ARCHIVE"), expansion.UseOptions{WorkDir: os.Getenv("KUBEPLUG_PUSH_WORK")})
		if l.HasFatal() {
			log.Fatal(l)
		}
		if _, err := ld.PushImages(context.Background(), os.Getenv("KUBEPLUG_PUSH_HOST"), expansion.PushOptions{Insecure: true}); err != nil {
			log.Fatal(err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestPushSurvivesKill9 kills a push with SIGKILL while a blob is being sent:
// the image is not tagged, and the next push sends only the blobs the registry
// lacks (none twice), then tags the image.
func TestPushSurvivesKill9(t *testing.T) {
	ctx := context.Background()
	src := startRegistry(t)
	img, err := random.Image(1<<20, 4)
	if err != nil {
		t.Fatal(err)
	}
	ref := src + "/team/app:v1"
	if err := remote.Write(mustRef(t, ref), img); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	layers, _ := img.Layers()
	stallOn, _ := layers[2].Digest()

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"src/expansion.yaml": "apiVersion: kubeplug.dev/v1alpha1\nkind: Expansion\nmetadata: {name: site, version: 1.0.0}\nspec:\n  images: [" + ref + "]\n"})
	archive := filepath.Join(dir, "site.tar")
	if _, l := expansion.Create(ctx, filepath.Join(dir, "src"), archive, expansion.CreateOptions{}); l.HasFatal() {
		t.Fatal(l)
	}

	var mu sync.Mutex
	uploads := map[string]int{}
	stalled := make(chan struct{})
	var once sync.Once
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := r.URL.Query().Get("digest"); r.Method == http.MethodPut && d != "" {
			if d == stallOn.String() {
				first := false
				once.Do(func() { first = true })
				if first {
					close(stalled)
					<-r.Context().Done() // held until the pusher dies
					return
				}
			}
			mu.Lock()
			uploads[d]++
			mu.Unlock()
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(site.Close)
	host := strings.TrimPrefix(site.URL, "http://")

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^$")
	cmd.Env = append(os.Environ(), pushHelperEnv+"=1", "KUBEPLUG_PUSH_ARCHIVE="+archive, "KUBEPLUG_PUSH_HOST="+host, "KUBEPLUG_PUSH_WORK="+t.TempDir())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stalled:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the push never reached the stalled blob")
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup runs
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := remote.Head(mustRef(t, host+"/team/app:v1")); err == nil {
		t.Fatal("the image is tagged although the push was killed before its blobs were all sent")
	}
	mu.Lock()
	before := len(uploads)
	mu.Unlock()

	ld, l := expansion.Load(ctx, archive, expansion.UseOptions{WorkDir: t.TempDir()})
	if l.HasFatal() {
		t.Fatal(l)
	}
	if _, err := ld.PushImages(ctx, host, expansion.PushOptions{Insecure: true}); err != nil {
		t.Fatal(err)
	}
	for d, n := range uploads {
		if n != 1 {
			t.Errorf("blob %s sent %d times", d, n)
		}
	}
	if len(uploads) <= before {
		t.Errorf("the resumed push sent nothing (%d blobs before the kill, %d after)", before, len(uploads))
	}
	desc, err := remote.Get(mustRef(t, host+"/team/app:v1"))
	if err != nil || desc.Digest != want {
		t.Fatalf("site has %v (%v), want %s", desc, err, want)
	}
}
