package expansion

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// ImageSource says whether an image the expansions lack is available all the
// same (the site registry holds it). Nil means nothing else is available.
type ImageSource func(ctx context.Context, image string) bool

// CheckImages checks that every image the model's Kubernetes objects reference
// is carried by an expansion or, failing that, available from site. Each image
// missing is an error naming it and every object that references it, with the
// plugin that contributed the object.
func (s *Set) CheckImages(ctx context.Context, m *model.Model, site ImageSource) diag.List {
	var l diag.List
	have := s.Images()
	missing := map[string][]string{}
	var order []string
	for _, o := range m.Kubernetes.Objects {
		what := objectName(o.Object)
		if o.By != "" {
			what += " (plugin " + o.By + ")"
		}
		walkImages(o.Object, func(img string) {
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
		l.Errorf("", 0, 0, "", "image %s, referenced by %s, is in no expansion%s: pack it (kubeplug expansion create -f cluster.yaml packs every image the render references)",
			img, joinAnd(missing[img]), map[bool]string{true: " and not in the site registry", false: ""}[site != nil])
	}
	return l
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
	// Insecure talks plain HTTP (a registry on loopback or a private network).
	Insecure bool
	// Remote are extra options of go-containerregistry's remote package
	// (credentials, transport).
	Remote []remote.Option
}

// PushImages pushes every image of the expansions to the registry at host,
// under the names [RewriteImage] gives. A blob the registry has is not sent
// again and a tag that already names the image's digest is left alone, so a
// push interrupted (even by kill -9) resumes where it stopped; an image's tag is
// written only after all its blobs, so no half-pushed image is ever tagged. It
// returns the references pushed.
func (s *Set) PushImages(ctx context.Context, host string, opts PushOptions) ([]string, error) {
	var pushed []string
	var nameOpts []name.Option
	if opts.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	ropts := append([]remote.Option{remote.WithContext(ctx)}, opts.Remote...)
	for _, e := range s.Expansions {
		if len(e.Images) == 0 {
			continue
		}
		lp, err := layout.FromPath(filepath.Join(e.Root, ImagesDir))
		if err != nil {
			return pushed, fmt.Errorf("expansion %s: images: %w", e.Name(), err)
		}
		idx, err := lp.ImageIndex()
		if err != nil {
			return pushed, fmt.Errorf("expansion %s: images: %w", e.Name(), err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return pushed, fmt.Errorf("expansion %s: images: %w", e.Name(), err)
		}
		for _, d := range im.Manifests {
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
			if d.MediaType.IsIndex() {
				child, ierr := idx.ImageIndex(d.Digest)
				if ierr != nil {
					return pushed, ierr
				}
				err = remote.WriteIndex(dst, child, ropts...)
			} else {
				img, ierr := idx.Image(d.Digest)
				if ierr != nil {
					return pushed, ierr
				}
				err = remote.Write(dst, img, ropts...)
			}
			if err != nil {
				return pushed, fmt.Errorf("push image %s to %s: %w", src, dst, err)
			}
			pushed = append(pushed, dst.String())
		}
	}
	return pushed, nil
}
