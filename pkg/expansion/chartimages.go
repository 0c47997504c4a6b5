package expansion

import (
	"slices"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/model"
)

// ChartObject is one object a Helm chart renders for a release of a plugin,
// with the cluster's values (see render.ChartObjects): the images a chart
// references are known only once it is rendered.
type ChartObject struct {
	// Plugin contributed the release; Chart is the release's chart (a path in
	// the plugin's package or a reference) and Release NAMESPACE/NAME.
	Plugin, Chart, Release string
	// Template is the chart's template that rendered the object, when known.
	Template string
	Object   map[string]any
}

// origin says where a chart's object came from, for a message.
func (c ChartObject) origin() string {
	s := "chart " + c.Chart + " of release " + c.Release
	if c.Template != "" {
		s += ", template " + c.Template
	}
	return s + ", plugin " + c.Plugin
}

// RewriteChartImages points every container image of the charts' objects at
// the registry at host, as [RewriteImages] does for manifests: a chart's
// objects are made by Helm when the release is rendered or installed, so the
// change is an object patch added to the model (one per object, replacing
// each container's image by its JSON pointer), which render applies to what
// it writes and the deployer to what Helm renders on the cluster (its
// post-renderer). It returns the changes, in object order.
func RewriteChartImages(m *model.Model, charts []ChartObject, host string) []Rewrite {
	var out []Rewrite
	for _, c := range charts {
		var ops []model.PatchOp
		what := objectName(c.Object)
		containerPointers(c.Object, "", func(ptr, img string) {
			to := RewriteImage(img, host)
			if to == img {
				return
			}
			ops = append(ops, model.PatchOp{Op: "replace", Path: ptr, Value: to})
			out = append(out, Rewrite{From: img, To: to, Object: what + " (" + c.origin() + ")"})
		})
		if len(ops) == 0 {
			continue
		}
		apiVersion, _ := c.Object["apiVersion"].(string)
		kind, _ := c.Object["kind"].(string)
		md, _ := c.Object["metadata"].(map[string]any)
		ns, _ := md["namespace"].(string)
		n, _ := md["name"].(string)
		m.Kubernetes.Patches = append(m.Kubernetes.Patches, model.ObjectPatch{
			Target: model.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: n},
			Ops:    ops,
			By:     c.Plugin,
		})
	}
	return out
}

// containerPointers calls f with the JSON pointer and the image of every
// container below v (the lists walkImages reads).
func containerPointers(v any, ptr string, f func(ptr, img string)) {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			kp := ptr + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			if slices.Contains(containerLists, k) {
				if items, ok := t[k].([]any); ok {
					for i, it := range items {
						if c, ok := it.(map[string]any); ok {
							if img, ok := c["image"].(string); ok && img != "" {
								f(kp+"/"+strconv.Itoa(i)+"/image", img)
							}
						}
					}
				}
				continue
			}
			containerPointers(t[k], kp, f)
		}
	case []any:
		for i, it := range t {
			containerPointers(it, ptr+"/"+strconv.Itoa(i), f)
		}
	}
}
