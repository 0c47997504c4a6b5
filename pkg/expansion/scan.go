package expansion

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ImageUse is one image a rendered object references.
type ImageUse struct {
	// Image is the reference as the object spells it.
	Image string `json:"image"`
	// Object names the object: "Kind namespace/name" or "Kind name".
	Object string `json:"object"`
	// File is the rendered file that holds the object.
	File string `json:"file"`
}

// containerLists are the fields whose items are containers with an image.
var containerLists = []string{"containers", "initContainers", "ephemeralContainers"}

// ScanImages finds every container image the objects of one rendered YAML file
// (one or more documents) reference, wherever their pod spec sits (Pods,
// workloads' templates, CronJobs' job templates, custom resources that embed a
// pod spec), in document order.
func ScanImages(file string, data []byte) ([]ImageUse, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []ImageUse
	for {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", file, err)
		}
		obj, ok := doc.(map[string]any)
		if !ok {
			continue
		}
		what := objectName(obj)
		walkImages(obj, func(img string) { out = append(out, ImageUse{Image: img, Object: what, File: file}) })
	}
}

// walkImages calls f with the image of every container below v.
func walkImages(v any, f func(string)) {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			if slices.Contains(containerLists, k) {
				if items, ok := t[k].([]any); ok {
					for _, it := range items {
						if c, ok := it.(map[string]any); ok {
							if img, ok := c["image"].(string); ok && img != "" {
								f(img)
							}
						}
					}
				}
				continue
			}
			walkImages(t[k], f)
		}
	case []any:
		for _, it := range t {
			walkImages(it, f)
		}
	}
}

func objectName(obj map[string]any) string {
	kind, _ := obj["kind"].(string)
	md, _ := obj["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	if ns != "" {
		n = ns + "/" + n
	}
	return strings.TrimSpace(kind + " " + n)
}

// RewriteImage returns the reference under which a registry at host (host:port)
// serves img: the same repository path and tag or digest, under host
// (registry.k8s.io/coredns/coredns:v1.15.0 becomes HOST/coredns/coredns:v1.15.0,
// nginx:1.27 becomes HOST/library/nginx:1.27).
func RewriteImage(img, host string) string {
	full := NormalizeImage(img)
	reg, rest, ok := strings.Cut(full, "/")
	if !ok || reg == host {
		return img
	}
	return host + "/" + rest
}
