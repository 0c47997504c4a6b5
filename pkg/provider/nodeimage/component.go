package nodeimage

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// componentLib is where ComponentImage puts the program; its names are
// links to it in componentBin, which is on the image's PATH.
const (
	componentLib = "usr/local/lib/kubeplug"
	componentBin = "usr/local/bin"
)

// libDirs are where a dynamically linked program's libraries are looked for,
// as the dynamic loader of a Debian amd64 or arm64 host looks.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/lib", "/usr/lib"}

// ComponentImage is the image a control-plane machine's static Pods run: the
// multi-call program bin (kubeplug-localcluster, which runs as the component
// its argv[0] names), a link to it on PATH for each of names, the dynamic
// loader and libraries bin needs (from this host, where it was built), and an
// empty /tmp. One image for every component, so its layer is pushed once.
func ComponentImage(bin string, names ...string) (v1.Image, error) {
	prog, err := os.ReadFile(bin) //nolint:gosec // the cluster's own program
	if err != nil {
		return nil, err
	}
	libs, err := sharedLibs(bin)
	if err != nil {
		return nil, fmt.Errorf("component image from %s: %w", bin, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	mkdir := func(dir string, mode int64) error {
		var parts []string
		for d := dir; d != "." && d != "/"; d = path.Dir(d) {
			parts = append([]string{d}, parts...)
		}
		for _, d := range parts {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: mode, Typeflag: tar.TypeDir, ModTime: epoch}); err != nil {
				return err
			}
		}
		return nil
	}
	file := func(name string, mode int64, data []byte) error {
		if err := mkdir(path.Dir(name), 0o755); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: epoch}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := mkdir("tmp", 0o1777); err != nil {
		return nil, err
	}
	progName := path.Join(componentLib, filepath.Base(bin))
	if err := file(progName, 0o755, prog); err != nil {
		return nil, err
	}
	for _, lib := range libs {
		data, err := os.ReadFile(lib.from) //nolint:gosec // a library of this host's
		if err != nil {
			return nil, err
		}
		if err := file(lib.to, 0o755, data); err != nil {
			return nil, err
		}
	}
	if err := mkdir(componentBin, 0o755); err != nil {
		return nil, err
	}
	for _, n := range names {
		if n == "" || n != filepath.Base(n) {
			return nil, fmt.Errorf("component image: %q is not a program name", n)
		}
		if err := tw.WriteHeader(&tar.Header{Name: path.Join(componentBin, n), Linkname: "/" + progName, Mode: 0o777, Typeflag: tar.TypeSymlink, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return oneLayerImage(buf.Bytes(), goarch(bin), func(c *v1.Config) {
		c.Env = []string{"PATH=/" + componentBin + ":/usr/bin:/bin"}
	})
}

// oneLayerImage is the image of one uncompressed layer (the tar in layer):
// the registry is on this host, and gzip of a large program would cost more
// than sending it. configure sets its run configuration.
func oneLayerImage(layer []byte, arch string, configure func(*v1.Config)) (v1.Image, error) {
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, static.NewLayer(layer, types.OCIUncompressedLayer))
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	configure(&cf.Config)
	return mutate.ConfigFile(img, cf)
}

type lib struct{ from, to string }

// sharedLibs lists the dynamic loader and the libraries bin names (and theirs),
// each as the file on this host and its path in the image (the path the loader
// looks for: the interpreter's own, or the library directory it was found in).
// A static program has none.
func sharedLibs(bin string) ([]lib, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []lib
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("read its interpreter: %w", err)
		}
		interp := string(bytes.TrimRight(b, "\x00"))
		real, err := filepath.EvalSymlinks(interp)
		if err != nil {
			return nil, fmt.Errorf("its interpreter %s: %w", interp, err)
		}
		out = append(out, lib{from: real, to: interp[1:]})
	}
	seen := map[string]bool{}
	queue := []string{bin}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		ef, err := elf.Open(cur)
		if err != nil {
			return nil, err
		}
		needed, err := ef.ImportedLibraries()
		_ = ef.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cur, err)
		}
		for _, n := range needed {
			if seen[n] {
				continue
			}
			seen[n] = true
			found := ""
			for _, d := range libDirs {
				if _, err := os.Stat(filepath.Join(d, n)); err == nil {
					found = filepath.Join(d, n)
					break
				}
			}
			if found == "" {
				return nil, fmt.Errorf("library %s (needed by %s) is in none of %v", n, cur, libDirs)
			}
			real, err := filepath.EvalSymlinks(found)
			if err != nil {
				return nil, err
			}
			out = append(out, lib{from: real, to: found[1:]})
			queue = append(queue, real)
		}
	}
	return out, nil
}

// goarch is the image architecture of an ELF program.
func goarch(bin string) string {
	f, err := elf.Open(bin)
	if err != nil {
		return "amd64"
	}
	defer func() { _ = f.Close() }()
	if f.Machine == elf.EM_AARCH64 {
		return "arm64"
	}
	return "amd64"
}
