package expansion

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/oci"
)

// ImageSource says whether an image the expansions lack is available all the
// same (the site registry holds it). Nil means nothing else is available.
type ImageSource func(ctx context.Context, image string) bool

// CheckImages checks that every image the model's Kubernetes objects and the
// objects its Helm charts render (charts) reference is carried by an
// expansion or, failing that, available from site. Each image missing is an
// error naming it and every object that references it, with the plugin that
// contributed the object (and for a chart's object, the chart and its
// release), and the command that packs it (into the first expansion, from its
// source, with the cluster file clusterFile).
func (s *Set) CheckImages(ctx context.Context, m *model.Model, charts []ChartObject, site ImageSource, clusterFile string) diag.List {
	var l diag.List
	have := s.Images()
	missing := map[string][]string{}
	var order []string
	type use struct {
		obj  map[string]any
		what string
	}
	uses := make([]use, 0, len(m.Kubernetes.Objects)+len(charts))
	for _, o := range m.Kubernetes.Objects {
		what := objectName(o.Object)
		if o.By != "" {
			what += " (plugin " + o.By + ")"
		}
		uses = append(uses, use{o.Object, what})
	}
	for _, c := range charts {
		uses = append(uses, use{c.Object, objectName(c.Object) + " (" + c.origin() + ")"})
	}
	for _, u := range uses {
		what := u.what
		walkImages(u.obj, func(img string) {
			if have[NormalizeImage(img)] != nil {
				return
			}
			if _, seen := missing[img]; !seen {
				if site != nil && site(ctx, img) {
					have[NormalizeImage(img)] = &Loaded{}
					return
				}
				order = append(order, img)
			}
			if !slices.Contains(missing[img], what) {
				missing[img] = append(missing[img], what)
			}
		})
	}
	for _, img := range order {
		where := " and not in the site registry"
		if site == nil {
			where = ""
		}
		l.Errorf("", 0, 0, "", "image %s, referenced by %s, is in no expansion%s%s: %s",
			img, joinAnd(missing[img]), s.used(), where, s.packHint(img, clusterFile, site != nil))
	}
	return l
}

// used names the expansions in use, for a message: " (expansions used: a
// 1.0.0 from exp/a.tar)".
func (s *Set) used() string {
	var names []string
	for _, e := range s.Expansions {
		names = append(names, e.Manifest.Metadata.Name+" "+e.Manifest.Metadata.Version+" from "+e.Location)
	}
	if len(names) == 0 {
		return " (no expansion found)"
	}
	return " (expansions used: " + strings.Join(names, ", ") + ")"
}

// packHint says how to add img to the expansions: the create command that
// packs it into the first one again, from its source directory.
func (s *Set) packHint(img, clusterFile string, site bool) string {
	if clusterFile == "" {
		clusterFile = "cluster.yaml"
	}
	if len(s.Expansions) == 0 {
		return "pack it: kubeplug expansion create -f " + clusterFile + " -o expansion.tar (packs every image the render references) into a directory given with --expansion-dir"
	}
	e := s.Expansions[0]
	out := e.Location
	if !e.Archive {
		out = e.Manifest.Metadata.Name + ".tar"
	}
	hint := "pack it into expansion " + e.Manifest.Metadata.Name + " again, from its source directory SOURCE: kubeplug expansion create -f SOURCE/" + ManifestFile +
		" -f " + clusterFile + " --image " + img + " -o " + out
	if site {
		hint += "; or push it to the site registry"
	}
	return hint
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := ""
	for i, x := range s {
		switch {
		case i == 0:
		case i == len(s)-1:
			out += " and "
		default:
			out += ", "
		}
		out += x
	}
	return out
}

// Rewrite is one image reference changed in the model.
type Rewrite struct {
	From, To string
	// Object is the object whose container changed.
	Object string
}

// RewriteImages points every container image of the model's Kubernetes objects
// at the registry at host (see [RewriteImage]), so that render shows and deploy
// applies the site's references. It returns the changes, in object order.
func RewriteImages(m *model.Model, host string) []Rewrite {
	var out []Rewrite
	for _, o := range m.Kubernetes.Objects {
		what := objectName(o.Object)
		rewriteContainers(o.Object, func(img string) string {
			to := RewriteImage(img, host)
			if to != img {
				out = append(out, Rewrite{From: img, To: to, Object: what})
			}
			return to
		})
	}
	return out
}

// rewriteContainers replaces the image of every container below v with f's.
func rewriteContainers(v any, f func(string) string) {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			if slices.Contains(containerLists, k) {
				if items, ok := t[k].([]any); ok {
					for _, it := range items {
						if c, ok := it.(map[string]any); ok {
							if img, ok := c["image"].(string); ok && img != "" {
								c["image"] = f(img)
							}
						}
					}
				}
				continue
			}
			rewriteContainers(t[k], f)
		}
	case []any:
		for _, it := range t {
			rewriteContainers(it, f)
		}
	}
}

// PushOptions say how [Set.PushImages] reaches the site registry.
type PushOptions struct {
	// Insecure talks plain HTTP (a registry on a private network). A loopback
	// registry is spoken to in plain HTTP without it, as everywhere else
	// (oci.IsLoopback).
	Insecure bool
	// Remote are extra options of go-containerregistry's remote package
	// (credentials, transport).
	Remote []remote.Option
}

// PushImages pushes every image of the expansions to the registry at host,
// under the names [RewriteImage] gives, reading each blob where it is: the
// expansion's directory, or straight from its archive's bytes (no unpacking),
// every byte checked against its digest as it streams. A blob the registry has
// is not sent again and a tag that already names the image's digest is left
// alone, so a push interrupted (even by kill -9) resumes where it stopped; an
// image's tag is written only after all its blobs, so no half-pushed image is
// ever tagged. It returns the references pushed.
func (s *Set) PushImages(ctx context.Context, host string, opts PushOptions) ([]string, error) {
	var pushed []string
	for _, e := range s.Expansions {
		p, err := e.PushImages(ctx, host, opts)
		pushed = append(pushed, p...)
		if err != nil {
			return pushed, err
		}
	}
	return pushed, nil
}

// PushImages pushes the images of one expansion, as [Set.PushImages] does.
func (e *Loaded) PushImages(ctx context.Context, host string, opts PushOptions) ([]string, error) {
	if e.index == nil {
		return nil, nil
	}
	nameOpts := opts.nameOptions(host)
	ropts := append([]remote.Option{remote.WithContext(ctx)}, opts.Remote...)
	var idx v1.IndexManifest
	if err := json.Unmarshal(e.index, &idx); err != nil {
		return nil, fmt.Errorf("expansion %s: %s/index.json: %w", e.Name(), ImagesDir, err)
	}
	var pushed []string
	for _, d := range idx.Manifests {
		src := d.Annotations[RefName]
		if src == "" {
			continue
		}
		dst, err := name.ParseReference(RewriteImage(src, host), nameOpts...)
		if err != nil {
			return pushed, fmt.Errorf("image %s: %w", src, err)
		}
		if desc, err := remote.Head(dst, ropts...); err == nil && desc.Digest == d.Digest {
			pushed = append(pushed, dst.String())
			continue
		}
		if err := e.pushManifest(ctx, dst, d, ropts); err != nil {
			return pushed, fmt.Errorf("push image %s of expansion %s to %s: %w", src, e.Name(), dst, err)
		}
		pushed = append(pushed, dst.String())
	}
	return pushed, nil
}

// maxManifest bounds a manifest read from a layout.
const maxManifest = 4 << 20

// pushManifest pushes the blobs a manifest names (the manifests an index names,
// by digest), then the manifest as ref.
func (e *Loaded) pushManifest(ctx context.Context, ref name.Reference, d v1.Descriptor, ropts []remote.Option) error {
	if d.Size > maxManifest {
		return fmt.Errorf("manifest %s is %d bytes, past the %d-byte limit", d.Digest, d.Size, maxManifest)
	}
	rc, err := e.openBlob(d.Digest, d.Size)
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	repo := ref.Context()
	if d.MediaType.IsIndex() {
		var idx v1.IndexManifest
		if err := json.Unmarshal(raw, &idx); err != nil {
			return fmt.Errorf("index %s: %w", d.Digest, err)
		}
		for _, c := range idx.Manifests {
			if err := e.pushManifest(ctx, repo.Digest(c.Digest.String()), c, ropts); err != nil {
				return err
			}
		}
	} else {
		var m v1.Manifest
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("manifest %s: %w", d.Digest, err)
		}
		for _, b := range append([]v1.Descriptor{m.Config}, m.Layers...) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := remote.WriteLayer(repo, &blobLayer{e: e, d: b}, ropts...); err != nil {
				return fmt.Errorf("blob %s: %w", b.Digest, err)
			}
		}
	}
	return remote.Put(ref, rawManifest{raw, d.MediaType}, ropts...)
}

// openBlob opens a blob of the image layout, checked against its digest as it
// is read: from the unpacked files, or at its offset in the archive.
func (e *Loaded) openBlob(h v1.Hash, size int64) (io.ReadCloser, error) {
	rel := path.Join(ImagesDir, "blobs", h.Algorithm, h.Hex)
	f, ok := e.Files[rel]
	if !ok {
		return nil, fmt.Errorf("blob %s is not in expansion %s", h, e.Name())
	}
	if f.Size != size {
		return nil, fmt.Errorf("blob %s is %d bytes, its descriptor says %d", h, f.Size, size)
	}
	var r io.Reader
	var c io.Closer
	if off, ok := e.offsets[rel]; ok && e.Archive {
		af, err := os.Open(e.Location)
		if err != nil {
			return nil, err
		}
		r, c = io.NewSectionReader(af, off, f.Size), af
	} else {
		bf, err := os.Open(filepath.Join(e.Root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		r, c = bf, bf
	}
	return &verifying{r: io.LimitReader(r, f.Size), c: c, h: sha256.New(), want: f.Digest, name: rel}, nil
}

// verifying checks at EOF that what was read has the digest wanted.
type verifying struct {
	r          io.Reader
	c          io.Closer
	h          hash.Hash
	want, name string
}

func (v *verifying) Read(b []byte) (int, error) {
	n, err := v.r.Read(b)
	v.h.Write(b[:n])
	if errors.Is(err, io.EOF) {
		if got := "sha256:" + hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			return n, fmt.Errorf("%s changed since the expansion was verified (digest %s, verified %s)", v.name, got, v.want)
		}
	}
	return n, err
}

func (v *verifying) Close() error { return v.c.Close() }

// blobLayer is a blob of an expansion's layout as go-containerregistry uploads it.
type blobLayer struct {
	e *Loaded
	d v1.Descriptor
}

func (b *blobLayer) Digest() (v1.Hash, error)            { return b.d.Digest, nil }
func (b *blobLayer) DiffID() (v1.Hash, error)            { return b.d.Digest, nil }
func (b *blobLayer) Size() (int64, error)                { return b.d.Size, nil }
func (b *blobLayer) MediaType() (types.MediaType, error) { return b.d.MediaType, nil }
func (b *blobLayer) Compressed() (io.ReadCloser, error)  { return b.e.openBlob(b.d.Digest, b.d.Size) }
func (b *blobLayer) Uncompressed() (io.ReadCloser, error) {
	return nil, errors.New("an expansion's blobs are pushed as they are")
}

var _ v1.Layer = (*blobLayer)(nil)

// rawManifest is a manifest pushed as its bytes.
type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

// nameOptions are the reference options for the registry at host: plain HTTP
// when Insecure says so or host is a loopback address.
func (o PushOptions) nameOptions(host string) []name.Option {
	if o.Insecure || oci.IsLoopback(host) {
		return []name.Option{name.Insecure}
	}
	return nil
}
