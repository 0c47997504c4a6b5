package realnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubeplug/kubeplug/pkg/provider/nodeimage"
)

// RegistryPort is the port of the cluster's registry on the gateway.
const RegistryPort = 5000

// Registry is a cluster's OCI registry: the kubeplug-registry program serving
// Dir on the gateway, where the nodes (and the host) reach it.
type Registry struct {
	// Bin is the kubeplug-registry program.
	Bin string
	// Dir holds its blobs, manifests, log and pid file.
	Dir string
	// Network is the cluster's node network.
	Network Network
	// Progress, when set, is told how each image push goes: when it starts,
	// as its bytes are uploaded, and when it ends.
	Progress func(PushProgress)
}

// PushProgress tells how one image push goes (Registry.Progress).
type PushProgress struct {
	// Image is the name pushed.
	Image string
	// Complete of Total bytes are uploaded (Total 0 while unknown).
	Complete, Total int64
	// Done says the push ended; Err is why it failed.
	Done bool
	Err  error
}

// write pushes one image (or index) to ref with write, telling progress how it
// goes when it is set.
func write(ctx context.Context, ref name.Reference, progress func(PushProgress), write func(...remote.Option) error) error {
	if progress == nil {
		return write(remote.WithContext(ctx))
	}
	img := ref.String()
	progress(PushProgress{Image: img})
	updates := make(chan v1.Update, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for u := range updates {
			if u.Error == nil {
				progress(PushProgress{Image: img, Complete: u.Complete, Total: u.Total})
			}
		}
	}()
	err := write(remote.WithContext(ctx), remote.WithProgress(updates))
	<-done // remote closes updates when it is done with them (its options, ours, never fail)
	progress(PushProgress{Image: img, Done: true, Err: err})
	return err
}

// Addr is host:port of the registry.
func (r *Registry) Addr() string {
	return net.JoinHostPort(r.Network.Gateway().String(), strconv.Itoa(RegistryPort))
}

// Start starts the registry unless it runs, and waits until it answers.
func (r *Registry) Start(ctx context.Context) error {
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return err
	}
	if !r.alive() {
		logf, err := os.OpenFile(filepath.Join(r.Dir, "registry.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		cmd := exec.Command(r.Bin, "--listen", r.Addr(), "--dir", r.Dir)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
		_ = logf.Close()
		if err != nil {
			return fmt.Errorf("start registry: %w", err)
		}
		if err := os.WriteFile(filepath.Join(r.Dir, "registry.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			return err
		}
		go func() { _ = cmd.Wait() }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + r.Addr() + "/v2/")
		if err == nil {
			_ = resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("registry on %s does not answer: %w (log: %s)", r.Addr(), err, filepath.Join(r.Dir, "registry.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *Registry) pid() int {
	b, err := os.ReadFile(filepath.Join(r.Dir, "registry.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func (r *Registry) alive() bool {
	pid := r.pid()
	if pid <= 0 {
		return false
	}
	// Its data directory identifies it, whichever binary runs it.
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(cmdline, []byte("\x00--dir\x00"+r.Dir+"\x00"))
}

// Stop stops the registry (its data stays in Dir).
func (r *Registry) Stop(ctx context.Context) error {
	if !r.alive() {
		_ = os.Remove(filepath.Join(r.Dir, "registry.pid"))
		return nil
	}
	pid := r.pid()
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(5 * time.Second)
	for r.alive() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	_ = os.Remove(filepath.Join(r.Dir, "registry.pid"))
	return nil
}

// PushBinary builds an image of one static binary, ko-style (no daemon, no
// Dockerfile: the binary as the only layer on an empty base, entrypoint set,
// fixed timestamps so the same binary gives the same digest), and pushes it to
// the registry as repo:tag unless that tag already names the same digest.
func (r *Registry) PushBinary(ctx context.Context, repo, tag, bin string) (string, error) {
	img, err := nodeimage.BinaryImage(bin)
	if err != nil {
		return "", err
	}
	return r.PushImage(ctx, repo, tag, img)
}

// Load pushes the images of an archive into the registry: a docker-archive
// tarball (`docker save`, `crane pull --format tarball`) or an OCI image layout
// directory. Each image keeps its repository path and tag (example.com/team/app:v1
// becomes team/app:v1 in the registry), which is what the nodes ask for when a Pod
// names the image under any registry. It returns the names pushed.
func (r *Registry) Load(ctx context.Context, path string) ([]string, error) {
	return loadArchive(ctx, r.Addr(), path, r.Progress)
}

// LoadArchive is Load for the registry at addr (host:port, plain HTTP).
func LoadArchive(ctx context.Context, addr, path string) ([]string, error) {
	return loadArchive(ctx, addr, path, nil)
}

func loadArchive(ctx context.Context, addr, path string, progress func(PushProgress)) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return loadLayout(ctx, addr, path, progress)
	}
	opener := func() (io.ReadCloser, error) { return os.Open(path) }
	manifest, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("%s: not a docker-archive tarball or OCI layout directory: %w", path, err)
	}
	var pushed []string
	for _, desc := range manifest {
		if len(desc.RepoTags) == 0 {
			return pushed, fmt.Errorf("%s: an image without a name (RepoTags) cannot be pulled by name; tag it when saving", path)
		}
		for _, tag := range desc.RepoTags {
			t, err := name.NewTag(tag)
			if err != nil {
				return pushed, fmt.Errorf("%s: image name %q: %w", path, tag, err)
			}
			img, err := tarball.Image(opener, &t)
			if err != nil {
				return pushed, fmt.Errorf("%s: %s: %w", path, tag, err)
			}
			dst, err := name.NewTag(addr+"/"+t.RepositoryStr()+":"+t.TagStr(), name.Insecure)
			if err != nil {
				return pushed, err
			}
			if err := write(ctx, dst, progress, func(o ...remote.Option) error { return remote.Write(dst, img, o...) }); err != nil {
				return pushed, fmt.Errorf("push %s: %w", tag, err)
			}
			pushed = append(pushed, t.Name())
		}
	}
	return pushed, nil
}

// loadLayout pushes the named manifests of an OCI image layout: those whose
// descriptor carries a full image name in io.containerd.image.name or
// org.opencontainers.image.ref.name.
func loadLayout(ctx context.Context, addr, dir string, progress func(PushProgress)) ([]string, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: not an OCI image layout: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	var pushed []string
	for _, desc := range im.Manifests {
		ref := desc.Annotations["io.containerd.image.name"]
		if ref == "" {
			ref = desc.Annotations["org.opencontainers.image.ref.name"]
		}
		t, err := name.NewTag(ref)
		if ref == "" || err != nil || !strings.ContainsAny(ref, "/:") {
			return pushed, fmt.Errorf("%s: manifest %s has no image name (annotation io.containerd.image.name or a full org.opencontainers.image.ref.name)", dir, desc.Digest)
		}
		dst, err := name.NewTag(addr+"/"+t.RepositoryStr()+":"+t.TagStr(), name.Insecure)
		if err != nil {
			return pushed, err
		}
		if desc.MediaType.IsIndex() {
			child, ierr := idx.ImageIndex(desc.Digest)
			if ierr != nil {
				return pushed, ierr
			}
			err = write(ctx, dst, progress, func(o ...remote.Option) error { return remote.WriteIndex(dst, child, o...) })
		} else {
			img, ierr := idx.Image(desc.Digest)
			if ierr != nil {
				return pushed, ierr
			}
			err = write(ctx, dst, progress, func(o ...remote.Option) error { return remote.Write(dst, img, o...) })
		}
		if err != nil {
			return pushed, fmt.Errorf("push %s: %w", ref, err)
		}
		pushed = append(pushed, t.Name())
	}
	return pushed, nil
}
