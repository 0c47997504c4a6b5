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
	out := r.decode(order, byPlugin, func(*kubeObject) bool { return true })
	if r.diags.HasFatal() {
		return nil, r.diags
	}
	return out, r.diags
}

// decode turns the objects keep selects into plain JSON values, by plugin.
func (r *renderer) decode(order []string, byPlugin map[string][]*kubeObject, keep func(*kubeObject) bool) map[string][]map[string]any {
	out := make(map[string][]map[string]any, len(order))
	for _, p := range order {
		for _, o := range byPlugin[p] {
			if !keep(o) {
				continue
			}
			if o.obj != nil {
				// Already what decoding its JSON would make, and no one
				// else's: render makes it once.
				out[p] = append(out[p], o.obj)
				continue
			}
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
	return out
}
