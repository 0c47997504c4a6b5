package expansion

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/sign"
)

// PulledPluginPath is where a package keeps the plugin archive it pulled for a
// reference pinned by digest.
func PulledPluginPath(digest string) string {
	return path.Join("plugins", "oci", strings.TrimPrefix(digest, "sha256:")+".tgz")
}

// CreateOptions say how [Create] packs an expansion.
type CreateOptions struct {
	// Images are pulled into the package besides those expansion.yaml lists
	// (the images a cluster's render references).
	Images []string
	// Why says, by image, what references it ("Deployment default/web in
	// kubernetes/00-web.yaml"), for the message when it cannot be pulled.
	Why map[string]string
	// Platform is the platform pulled from a multi-platform image; default
	// linux/amd64.
	Platform *v1.Platform
	// Keychain gives registry credentials; default authn.DefaultKeychain.
	Keychain authn.Keychain
	// Plugins pulls plugin archives named by reference; nil when the manifest
	// names none.
	Plugins *oci.Client
	// Pulled is a directory where those archives were pulled already
	// (OpenSourceSet's WorkDir): they are taken from there, not pulled again.
	Pulled string
	// Archives are `docker save` tarballs and OCI image layout directories
	// whose images are packed (by the names they carry) besides the pulled
	// ones; an image an archive holds is not pulled.
	Archives []string
	// Mirrors say where images are pulled from instead of their own registry
	// (building offline, or through a proxy); they are packed under their
	// own names all the same.
	Mirrors []Mirror
	// URLFiles are node files downloaded from a URL (a plugin's
	// nodes[].files[].url), by hex SHA-256: packed under urlfiles/sha256/ so
	// that a run with the expansion needs no network for them.
	URLFiles map[string][]byte
	// Signer signs the package; nil leaves it unsigned.
	Signer *sign.Signer
	// Limits bound the source directory.
	Limits Limits
	// Logger reports progress; default none.
	Logger *slog.Logger
}

// Create packs the expansion source directory src into the archive out: its
// files, every image its manifest and opts.Images name (pulled from their
// registries into images/ as an OCI image layout, one platform, layers streamed
// to disk), every plugin it names by reference (pulled and checked against its
// digest), checksums.txt and, with a signer, the signature. It stages the
// package in a directory beside out (source files hard-linked where the file
// system allows, so nothing is copied twice) and writes out atomically: on
// any error out is left as it was.
func Create(ctx context.Context, src, out string, opts CreateOptions) (*Written, diag.List) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pkg, l := OpenSource(ctx, src, opts.Limits)
	if pkg == nil || pkg.Manifest == nil {
		return nil, l
	}
	if pkg.Checksums != nil {
		l.Errorf(pkg.where(ChecksumsFile), 0, 0, "", "%s is already a packed expansion (it has %s); create packs a source directory", src, ChecksumsFile)
		return nil, l
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		l.Errorf(out, 0, 0, "", "cannot create the archive's directory: %v", err)
		return nil, l
	}
	stage, err := os.MkdirTemp(filepath.Dir(out), ".expansion-stage-")
	if err != nil {
		l.Errorf(out, 0, 0, "", "cannot stage the expansion: %v", err)
		return nil, l
	}
	defer func() { _ = os.RemoveAll(stage) }()
	if !stageFiles(pkg, src, out, stage, opts.URLFiles, &l) || !stagePlugins(ctx, pkg, stage, opts, log, &l) {
		return nil, l
	}
	if !stageImages(ctx, src, stage, pkg.Manifest, opts, log, &l) {
		return nil, l
	}
	w, err := writeStaged(ctx, out, stage, pkg.Manifest, opts.Signer)
	if err != nil {
		l.Errorf(out, 0, 0, "", "%v", err)
		return nil, l
	}
	return w, l
}

// stageFiles puts the source files of pkg (from src) and the URL files in
// stage; false, with the error in l, when one cannot be.
func stageFiles(pkg *Package, src, out, stage string, urlFiles map[string][]byte, l *diag.List) bool {
	for _, f := range sortedKeys(pkg.Files) {
		if err := linkOrCopy(filepath.Join(src, filepath.FromSlash(f)), filepath.Join(stage, filepath.FromSlash(f))); err != nil {
			l.Errorf(pkg.where(f), 0, 0, "", "cannot stage: %v", err)
			return false
		}
	}
	if err := writeURLFiles(stage, urlFiles); err != nil {
		l.Errorf(out, 0, 0, "", "cannot stage: %v", err)
		return false
	}
	return true
}

// stagePlugins puts every plugin the manifest names by reference in stage:
// from opts.Pulled when it is there (checked against its digest when it was
// pulled), else pulled and checked; false, with the error at the plugin's ref
// in l, when one cannot be.
func stagePlugins(ctx context.Context, pkg *Package, stage string, opts CreateOptions, log *slog.Logger, l *diag.List) bool {
	for i, p := range pkg.Manifest.Spec.Plugins {
		if p.Ref == "" {
			continue
		}
		dst := filepath.Join(stage, filepath.FromSlash(PulledPluginPath(p.Digest)))
		if opts.Pulled != "" {
			if err := linkOrCopy(filepath.Join(opts.Pulled, filepath.FromSlash(PulledPluginPath(p.Digest))), dst); err == nil {
				continue // checked against its digest when it was pulled
			}
		}
		if err := pullPlugin(ctx, opts.Plugins, p.Ref, p.Digest, dst); err != nil {
			pkg.doc.Errorf(l, fmt.Sprintf("/spec/plugins/%d/ref", i), "%v", err)
			return false
		}
		log.Info("pulled plugin", "ref", p.Ref, "digest", p.Digest)
	}
	return true
}

// stageImages loads opts.Archives and pulls every image the manifest and
// opts.Images name into stage's images/ for one platform (linux/amd64 unless
// opts.Platform); false, with the error in l, when one cannot be.
func stageImages(ctx context.Context, src, stage string, m *v1alpha1.Expansion, opts CreateOptions, log *slog.Logger, l *diag.List) bool {
	images := slices.Clone(m.Spec.Images)
	images = append(images, opts.Images...)
	platform := opts.Platform
	if platform == nil {
		platform = &v1.Platform{OS: "linux", Architecture: "amd64"}
	}
	if _, err := loadArchives(ctx, filepath.Join(stage, ImagesDir), opts.Archives, platform, log); err != nil {
		l.Errorf("", 0, 0, "", "%v", err) // the error names the archive
		return false
	}
	if err := pullImages(ctx, filepath.Join(stage, ImagesDir), images, opts, log); err != nil {
		l.Errorf(src, 0, 0, "", "%v", err)
		return false
	}
	return true
}

// writeStaged writes the staged package to out atomically, through a
// temporary file beside it: on any error out is left as it was.
func writeStaged(ctx context.Context, out, stage string, m *v1alpha1.Expansion, signer *sign.Signer) (*Written, error) {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".expansion-*.tar")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	w, err := Write(ctx, tmp, stage, WriteOptions{Signer: signer, Executable: scripts(m)})
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		w.Images, err = layoutNames(filepath.Join(stage, ImagesDir))
	}
	if err == nil {
		err = os.Rename(tmp.Name(), out)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot write the expansion: %w", err)
	}
	return w, nil
}

// linkOrCopy puts src at dst: a hard link when the file system allows, else a copy.
func linkOrCopy(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	// A FIFO or a device would never end: refused, like every file read here.
	in, fi, err := bounded.OpenFile(src)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	defer func() { _ = in.Close() }()
	o, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(o, in)
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	return err
}

// pullPlugin pulls a plugin archive by reference and checks its digest.
func pullPlugin(ctx context.Context, c *oci.Client, ref, digest, dst string) error {
	if c == nil {
		return errors.New("no registry client to pull plugins with")
	}
	p, err := c.Pull(ctx, ref)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(p.Archive)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest {
		return fmt.Errorf("plugin %s has digest %s, not the %s the expansion pins", ref, got, digest)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, p.Archive, 0o644)
}

// pullImages pulls each image into the OCI image layout at dir (created when
// absent), annotated with its full reference, unless the layout has it already.
func pullImages(ctx context.Context, dir string, images []string, opts CreateOptions, log *slog.Logger) error {
	lp, have, err := openLayout(dir, len(images) > 0)
	if err != nil {
		return err
	}
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	platform := opts.Platform
	if platform == nil {
		platform = &v1.Platform{OS: "linux", Architecture: "amd64"}
	}
	seen := map[string]bool{}
	for _, img := range images {
		full := NormalizeImage(img)
		if seen[full] || have[full] {
			continue
		}
		seen[full] = true
		im, err := pullImage(ctx, img, opts, remote.WithAuthFromKeychain(kc), remote.WithPlatform(*platform))
		if err != nil {
			return err
		}
		if err := lp.AppendImage(im, layout.WithAnnotations(map[string]string{RefName: full})); err != nil {
			return fmt.Errorf("write image %s into the layout: %w", img, err)
		}
		log.Info("pulled image", "image", full)
	}
	return nil
}

// openLayout opens the OCI image layout at dir and says which images (by
// full reference) it has; when there is none, it creates an empty one if
// create.
func openLayout(dir string, create bool) (layout.Path, map[string]bool, error) {
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		if !create {
			return "", nil, nil
		}
		lp, err := layout.Write(dir, empty.Index)
		return lp, nil, err
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return "", nil, fmt.Errorf("%s: not an OCI image layout: %w", dir, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return "", nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return "", nil, err
	}
	have := map[string]bool{}
	for _, d := range im.Manifests {
		have[NormalizeImage(d.Annotations[RefName])] = true
	}
	return lp, have, nil
}

// pullImage pulls img, from its mirror in opts.Mirrors if it has one; the
// error says what referenced it (opts.Why).
func pullImage(ctx context.Context, img string, opts CreateOptions, ro ...remote.Option) (v1.Image, error) {
	ref, err := name.ParseReference(img, name.WeakValidation)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", img, err)
	}
	what := img
	if from, ok, err := mirrored(ref, opts.Mirrors); err != nil {
		return nil, err
	} else if ok {
		what = img + " from mirror " + from.Name()
		ref = from
	}
	im, err := remote.Image(ref, append([]remote.Option{remote.WithContext(ctx)}, ro...)...)
	if err != nil {
		if why := opts.Why[img]; why != "" {
			return nil, fmt.Errorf("pull image %s, referenced by %s: %w", what, why, err)
		}
		return nil, fmt.Errorf("pull image %s: %w", what, err)
	}
	return im, nil
}

// scripts are the files the manifest runs: installer and node hook scripts.
func scripts(m *v1alpha1.Expansion) []string {
	var out []string
	for _, h := range m.Spec.Hooks {
		if h.Script != "" {
			out = append(out, h.Script)
		}
	}
	for _, n := range m.Spec.Nodes {
		for _, h := range n.Hooks {
			if h.Run.Script != "" {
				out = append(out, h.Run.Script)
			}
		}
	}
	return out
}

// layoutNames lists the images of the layout at dir (none when there is none).
func layoutNames(dir string) ([]string, error) {
	b, err := bounded.ReadFile(filepath.Join(dir, "index.json"), maxLayoutJSON)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var l diag.List
	names := layoutImages(filepath.Join(dir, "index.json"), b, &l)
	return names, l.Err()
}
