package local

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider/nodeimage"
)

// onDemandImage is an on-demand built-in image (nodeimage.BuiltinImage.OnDemand)
// that the model's objects run, with the program that becomes it.
type onDemandImage struct {
	nodeimage.BuiltinImage
	// Binary is the program pushed as the image: the one in the images
	// directory (make controller-image), else this kubeplug itself.
	Binary string
	// By names what runs it: "Deployment kubeplug-system/kubeplug-controller
	// (plugin kubeplug-controller)".
	By string
}

// onDemandImages finds the on-demand built-in images the model's objects run
// and where each program is: the images directory first, else — for kubeplug's
// own image — this kubeplug's executable when it is linked statically (it
// then runs alone in an image, as `make controller-image` builds it). A
// needed image that has neither, or a cluster without a real node to run it,
// is an error saying what to do, before anything starts.
func (p *Provider) onDemandImages(m *model.Model, imagesDir string) ([]onDemandImage, error) {
	var out []onDemandImage
	for _, b := range nodeimage.BuiltinImages {
		if !b.OnDemand {
			continue
		}
		by := runBy(m, b.Image)
		if by == "" {
			continue
		}
		if !p.hasRealNodes(m) {
			return nil, fmt.Errorf("%s runs image %s, and only a real node runs it (on a simulated node its Pod would show Running and do nothing): "+
				"name a worker pool in spec.provider.local.realPools (see docs/controller.md)", by, b.Image)
		}
		img := onDemandImage{BuiltinImage: b, By: by, Binary: filepath.Join(imagesDir, b.Binary)}
		if _, err := os.Stat(img.Binary); err != nil {
			self, serr := selfImage(b)
			if serr != nil {
				return nil, fmt.Errorf("%s runs image %s, which is not built (no %s) and %v: "+
					"run `make controller-image` in the kubeplug repository (it writes %s), or set $%s to the directory holding %s",
					by, b.Image, img.Binary, serr, img.Binary, ImagesDirEnv, b.Binary)
			}
			img.Binary = self
		}
		out = append(out, img)
	}
	return out, nil
}

// hasRealNodes says whether a real pool of m has nodes.
func (p *Provider) hasRealNodes(m *model.Model) bool {
	return slices.ContainsFunc(p.opts.RealPools, func(name string) bool {
		pool := m.Pools[name]
		return pool != nil && pool.Count > 0
	})
}

// selfImage is this kubeplug's executable, when b is kubeplug's own image and
// the executable can run alone in it (linked statically).
func selfImage(b nodeimage.BuiltinImage) (string, error) {
	if b.Binary != "kubeplug" {
		return "", fmt.Errorf("kubeplug does not build %s itself", b.Binary)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("this kubeplug's executable cannot be found: %w", err)
	}
	if err := static(exe); err != nil {
		return "", fmt.Errorf("this kubeplug (%s) cannot be the image: %w", exe, err)
	}
	return exe, nil
}

// static checks that the ELF program at path needs no dynamic loader.
func static(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("it is linked dynamically (built with cgo; build it with CGO_ENABLED=0)")
		}
	}
	return nil
}

// runBy names the first object of m with a container running image, and the
// plugin that contributed it; "" when none does.
func runBy(m *model.Model, image string) string {
	want := normalImage(image)
	for _, o := range m.Kubernetes.Objects {
		if slices.ContainsFunc(containerImages(o.Object), func(s string) bool { return normalImage(s) == want }) {
			what := fmt.Sprint(o.Object["kind"]) + " "
			if md, ok := o.Object["metadata"].(map[string]any); ok {
				if ns, _ := md["namespace"].(string); ns != "" {
					what += ns + "/"
				}
				what += fmt.Sprint(md["name"])
			}
			if o.By != "" {
				what += " (plugin " + o.By + ")"
			}
			return what
		}
	}
	return ""
}

func normalImage(s string) string {
	if ref, err := name.ParseReference(s, name.WeakValidation); err == nil {
		return ref.Name()
	}
	return s
}

// containerImages lists the images of every container list below v.
func containerImages(v any) []string {
	var out []string
	switch t := v.(type) {
	case map[string]any:
		for k, sub := range t {
			if k == "containers" || k == "initContainers" || k == "ephemeralContainers" {
				if items, ok := sub.([]any); ok {
					for _, it := range items {
						if c, ok := it.(map[string]any); ok {
							if img, ok := c["image"].(string); ok && strings.TrimSpace(img) != "" {
								out = append(out, img)
							}
						}
					}
				}
				continue
			}
			out = append(out, containerImages(sub)...)
		}
	case []any:
		for _, sub := range t {
			out = append(out, containerImages(sub)...)
		}
	}
	return out
}
