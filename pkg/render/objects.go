package render

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// Objects returns each plugin's Kubernetes objects exactly as render writes them to
// kubernetes/NN-PLUGIN.yaml — manifests, Helm charts rendered through the Helm SDK,
// object patches applied — for a deployer to apply. Objects are plain JSON values.
func Objects(ctx context.Context, in Input) (map[string][]map[string]any, diag.List) {
	r := &renderer{in: in, out: map[string][]byte{}}
	if !r.check() {
		return nil, r.diags
	}
	order, byPlugin := r.objects(ctx)
	if err := ctx.Err(); err != nil {
		r.fatalf("", "", "render cancelled: %v", err)
	}
	if r.diags.HasFatal() {
		return nil, r.diags
	}
	out := make(map[string][]map[string]any, len(order))
	for _, p := range order {
		for _, o := range byPlugin[p] {
			dec := json.NewDecoder(bytes.NewReader(o.doc))
			dec.UseNumber()
			var v map[string]any
			if err := dec.Decode(&v); err != nil {
				r.fatalf(p, "kubernetes", "decoding %s: %v", refText(o.target), err)
				continue
			}
			out[p] = append(out[p], v)
		}
	}
	if r.diags.HasFatal() {
		return nil, r.diags
	}
	return out, r.diags
}
