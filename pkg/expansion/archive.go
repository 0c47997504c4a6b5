package expansion

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeplug/kubeplug/internal/bounded"
)

// containerdName is the annotation docker (with the containerd image store) and
// containerd write on an OCI layout's index to give an image's full name; the
// OCI annotation [RefName] often holds only the tag there.
const containerdName = "io.containerd.image.name"

// loadArchives adds the images of each archive to the OCI image layout at dir
// (created when absent), each annotated with its full name: a `docker save`
// tarball (manifest.json with RepoTags, in the layout docker has always
// written or in the OCI one docker 25 writes beside it) or an OCI image layout
// directory. Every layer is checked before anything is written: a layer whose
// bytes do not hash to the digest the archive gives it, or that cannot be read
// to its end (a truncated archive), is refused naming the archive and the
// layer. It returns the images added, by full name.
func loadArchives(ctx context.Context, dir string, archives []string, platform *v1.Platform, log *slog.Logger) ([]string, error) {
	if len(archives) == 0 {
		return nil, nil
	}
	var lp layout.Path
	var err error
	if _, serr := os.Stat(filepath.Join(dir, "index.json")); serr == nil {
		lp, err = layout.FromPath(dir)
	} else {
		lp, err = layout.Write(dir, empty.Index)
	}
	if err != nil {
		return nil, err
	}
	var added []string
	for _, a := range archives {
		imgs, err := archiveImages(ctx, a, platform)
		if err != nil {
			return nil, err
		}
		for _, ni := range imgs {
			if err := lp.AppendImage(ni.img, layout.WithAnnotations(map[string]string{RefName: ni.name})); err != nil {
				return nil, fmt.Errorf("image archive %s: write image %s into the layout: %w", a, ni.name, err)
			}
			log.Info("packed image from archive", "image", ni.name, "archive", a)
			added = append(added, ni.name)
		}
	}
	return added, nil
}

type namedImage struct {
	name string
	img  v1.Image
}

// archiveImages reads the images of one archive, checked layer by layer.
func archiveImages(ctx context.Context, path string, platform *v1.Platform) ([]namedImage, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("image archive %s: %w", path, unwrapPath(err))
	}
	switch {
	case fi.IsDir():
		if _, err := os.Stat(filepath.Join(path, "oci-layout")); err != nil {
			return nil, fmt.Errorf("image archive %s: a directory that is not an OCI image layout (it has no oci-layout file)", path)
		}
		return layoutDirImages(ctx, path, platform)
	case fi.Mode().IsRegular():
		return dockerArchiveImages(ctx, path)
	default:
		return nil, fmt.Errorf("image archive %s: a %s, not a docker save tarball or an OCI image layout directory", path, bounded.Kind(fi.Mode()))
	}
}

// dockerArchiveImages reads a `docker save` tarball. Its layers are kept as
// they are saved, uncompressed (media type application/vnd.oci.image.layer.v1.tar,
// digest the layer's diff ID), so packing costs no compression and every byte
// is checked against the diff ID the image's config gives it.
func dockerArchiveImages(ctx context.Context, path string) ([]namedImage, error) {
	opener := func() (io.ReadCloser, error) {
		f, _, err := bounded.OpenFile(path)
		return f, err
	}
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("docker archive %s: reading manifest.json (a docker save tarball has one): %w", path, err)
	}
	var out []namedImage
	for i, d := range m {
		if len(d.RepoTags) == 0 {
			return nil, fmt.Errorf("docker archive %s: image %d (config %s) has no name: save it by name, docker save IMAGE:TAG, so the expansion can say which image it is", path, i, d.Config)
		}
		tag, err := name.NewTag(d.RepoTags[0], name.WeakValidation)
		if err != nil {
			return nil, fmt.Errorf("docker archive %s: image %d is named %q: %w", path, i, d.RepoTags[0], err)
		}
		src, err := tarball.Image(opener, &tag)
		if err != nil {
			return nil, fmt.Errorf("docker archive %s: image %s: %w", path, d.RepoTags[0], err)
		}
		img, err := uncompressedImage(ctx, path, src)
		if err != nil {
			return nil, err
		}
		for _, t := range d.RepoTags {
			if err := CheckImageRef(t); err != nil {
				return nil, fmt.Errorf("docker archive %s: %w", path, err)
			}
			out = append(out, namedImage{NormalizeImage(t), img})
		}
	}
	return out, nil
}

// uncompressedImage checks every layer of src against the diff ID its config
// gives, reading it to its end, and returns the image with those layers as
// they are: uncompressed, each named by its diff ID.
func uncompressedImage(ctx context.Context, archive string, src v1.Image) (v1.Image, error) {
	cfg, err := src.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("docker archive %s: reading the image config: %w", archive, err)
	}
	layers, err := src.Layers()
	if err != nil {
		return nil, fmt.Errorf("docker archive %s: %w", archive, err)
	}
	img := &rawImage{config: cfg, layers: map[v1.Hash]*rawLayer{}}
	man := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(cfg)), Digest: sha256Hash(cfg)},
	}
	for _, l := range layers {
		diffID, err := l.DiffID()
		if err != nil {
			return nil, fmt.Errorf("docker archive %s: %w", archive, err)
		}
		size, err := checkBlob(ctx, archive, diffID, l.Uncompressed)
		if err != nil {
			return nil, err
		}
		img.layers[diffID] = &rawLayer{digest: diffID, size: size, mediaType: types.OCIUncompressedLayer, open: l.Uncompressed}
		man.Layers = append(man.Layers, v1.Descriptor{MediaType: types.OCIUncompressedLayer, Size: size, Digest: diffID})
	}
	if img.manifest, err = json.Marshal(man); err != nil {
		return nil, err
	}
	return partial.CompressedToImage(img)
}

// layoutDirImages reads an OCI image layout directory: every image its
// index.json names (from a multi-platform index, the one for platform), by the
// full name its annotations give. Each layer and config is checked against its
// digest and size.
func layoutDirImages(ctx context.Context, dir string, platform *v1.Platform) ([]namedImage, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("OCI layout %s: index.json: %w", dir, err)
	}
	var out []namedImage
	for i, d := range im.Manifests {
		n := d.Annotations[containerdName]
		if r := d.Annotations[RefName]; n == "" && strings.ContainsAny(r, ":@") && CheckImageRef(r) == nil {
			n = r
		}
		if n == "" {
			return nil, fmt.Errorf("OCI layout %s: index.json manifests[%d] (%s) has no full image name: annotate it with %s or %s, for example registry.example.com/team/app:v1", dir, i, d.Digest, containerdName, RefName)
		}
		if err := CheckImageRef(n); err != nil {
			return nil, fmt.Errorf("OCI layout %s: index.json manifests[%d]: %w", dir, i, err)
		}
		var img v1.Image
		switch {
		case d.MediaType.IsIndex():
			sub, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("OCI layout %s: image %s: %w", dir, n, err)
			}
			if img, err = platformImage(sub, platform); err != nil {
				return nil, fmt.Errorf("OCI layout %s: image %s: %w", dir, n, err)
			}
		case d.MediaType.IsImage():
			if img, err = idx.Image(d.Digest); err != nil {
				return nil, fmt.Errorf("OCI layout %s: image %s: %w", dir, n, err)
			}
		default:
			return nil, fmt.Errorf("OCI layout %s: index.json manifests[%d] is a %s, not an image or an index", dir, i, d.MediaType)
		}
		if err := checkImage(ctx, dir, img); err != nil {
			return nil, err
		}
		out = append(out, namedImage{NormalizeImage(n), img})
	}
	return out, nil
}

func platformImage(idx v1.ImageIndex, platform *v1.Platform) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var have []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			continue
		}
		if d.Platform.Satisfies(*platform) {
			return idx.Image(d.Digest)
		}
		have = append(have, d.Platform.String())
	}
	return nil, fmt.Errorf("no image for platform %s (it has %s)", platform, strings.Join(have, ", "))
}

// checkImage reads the config and every layer of a layout's image, checking
// each against its digest.
func checkImage(ctx context.Context, where string, img v1.Image) error {
	cfgName, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", where, err)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("OCI layout %s: config %s: %w", where, cfgName, err)
	}
	if got := sha256Hash(cfg); got != cfgName {
		return fmt.Errorf("OCI layout %s: config %s: its bytes hash to %s: the layout is damaged", where, cfgName, got)
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", where, err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("OCI layout %s: %w", where, err)
		}
		size, err := checkBlob(ctx, where, d, l.Compressed)
		if err != nil {
			return err
		}
		if want, err := l.Size(); err == nil && want != size {
			return fmt.Errorf("image archive %s: layer %s is %d bytes, not the %d its manifest says: the archive is damaged", where, d, size, want)
		}
	}
	return nil
}

// checkBlob reads what open gives to its end and checks it hashes to want; it
// returns its size. A read that fails (a truncated archive) or a digest that
// differs is refused naming the archive and the layer.
func checkBlob(ctx context.Context, archive string, want v1.Hash, open func() (io.ReadCloser, error)) (int64, error) {
	rc, err := open()
	if err != nil {
		return 0, fmt.Errorf("image archive %s: layer %s cannot be opened: %w", archive, want, err)
	}
	defer func() { _ = rc.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, rc})
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, fmt.Errorf("image archive %s: layer %s ends after %d bytes (%w): the archive is truncated", archive, want, n, err)
		}
		return 0, fmt.Errorf("image archive %s: layer %s cannot be read: %w", archive, want, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); want.Algorithm != "sha256" || got != want.String() {
		return 0, fmt.Errorf("image archive %s: layer %s does not match its content, which hashes to %s: the archive is damaged", archive, want, got)
	}
	return n, nil
}

func sha256Hash(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// rawImage is an image whose manifest, config and layers are given as they
// are (partial.CompressedImageCore): a docker archive's image with its layers
// uncompressed.
type rawImage struct {
	config, manifest []byte
	layers           map[v1.Hash]*rawLayer
}

var _ partial.CompressedImageCore = (*rawImage)(nil)

func (i *rawImage) RawConfigFile() ([]byte, error)      { return i.config, nil }
func (i *rawImage) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (i *rawImage) RawManifest() ([]byte, error)        { return i.manifest, nil }
func (i *rawImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := i.layers[h]; ok {
		return l, nil
	}
	if h == sha256Hash(i.config) {
		return partial.ConfigLayer(i)
	}
	return nil, fmt.Errorf("blob %s not in the image", h)
}

type rawLayer struct {
	digest    v1.Hash
	size      int64
	mediaType types.MediaType
	open      func() (io.ReadCloser, error)
}

func (l *rawLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *rawLayer) Compressed() (io.ReadCloser, error)  { return l.open() }
func (l *rawLayer) Size() (int64, error)                { return l.size, nil }
func (l *rawLayer) MediaType() (types.MediaType, error) { return l.mediaType, nil }
