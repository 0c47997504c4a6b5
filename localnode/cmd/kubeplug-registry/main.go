// Command kubeplug-registry is the local provider's OCI registry: the real nodes
// pull every image through it. It serves the distribution API
// (github.com/google/go-containerregistry/pkg/registry) with blobs on disk, and
// keeps the manifests pushed to it on disk too, replaying them at start, so that
// a restart keeps every image.
//
//	kubeplug-registry --listen 10.250.3.1:5000 --dir /path/to/registry
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/registry"
)

// saved is a manifest as it was pushed.
type saved struct {
	Path        string `json:"path"`
	ContentType string `json:"contentType"`
	Body        []byte `json:"body"`
}

func main() {
	listen := flag.String("listen", "127.0.0.1:5000", "address to serve on")
	dir := flag.String("dir", "", "directory for blobs and manifests")
	flag.Parse()
	if *dir == "" {
		log.Fatal("--dir is required")
	}
	manifests := filepath.Join(*dir, "manifests")
	for _, d := range []string{filepath.Join(*dir, "blobs"), manifests} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			log.Fatal(err)
		}
	}
	reg := registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(filepath.Join(*dir, "blobs"))),
		registry.Logger(log.New(io.Discard, "", 0)))
	if err := replay(reg, manifests); err != nil {
		log.Fatal(err)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: persist(reg, manifests)}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		<-sigs
		_ = srv.Close()
	}()
	fmt.Println("serving on", l.Addr())
	if err := srv.Serve(l); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

// persist saves every manifest PUT that the registry accepted.
func persist(next http.Handler, dir string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "/manifests/") {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		if rec.Code/100 == 2 {
			b, _ := json.Marshal(saved{Path: r.URL.Path, ContentType: r.Header.Get("Content-Type"), Body: body})
			sum := sha256.Sum256([]byte(r.URL.Path))
			name := filepath.Join(dir, hex.EncodeToString(sum[:])+".json")
			if err := os.WriteFile(name+".tmp", b, 0o644); err == nil {
				_ = os.Rename(name+".tmp", name)
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// replay pushes the saved manifests into a fresh registry.
func replay(reg http.Handler, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		var s saved
		if err := json.Unmarshal(b, &s); err != nil {
			continue // a torn write: the image is pushed again by whoever needs it
		}
		req := httptest.NewRequest(http.MethodPut, s.Path, bytes.NewReader(s.Body))
		req.Header.Set("Content-Type", s.ContentType)
		rec := httptest.NewRecorder()
		reg.ServeHTTP(rec, req)
	}
	return nil
}
