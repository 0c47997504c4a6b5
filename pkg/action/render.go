package action

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Render writes a cluster's reviewable files: control-plane static Pods, per-pool
// cloud-init and Ignition, the cloud template, Kubernetes manifests and rendered
// Helm charts, and plan.json. Sensitive values are rendered as ***.
type Render struct {
	cfg *Config
	// Stage is Render (every file) or Initialise (the model itself, as model.json,
	// with plan.json).
	Stage stage.Stage
}

// NewRender returns a Render action that renders every file.
func NewRender(cfg *Config) *Render { return &Render{cfg: cfg, Stage: stage.Render} }

// Files renders cl into memory: resolve, initialise, render (unless Stage is
// Initialise), then the files.
func (a *Render) Files(ctx context.Context, cl *config.Cluster) (map[string][]byte, diag.List) {
	until := a.Stage
	if until == "" {
		until = stage.Render
	}
	r := a.cfg.newRun(cl, true)
	defer r.close()
	l := specFacts(cl)
	l = append(l, r.pipeline(ctx, append([]step{resolveStep}, through(until)...)...)...)
	if l.HasFatal() {
		return nil, l
	}
	doc := r.plan.Doc(r.model)
	if until == stage.Initialise {
		files := map[string][]byte{}
		for name, v := range map[string]any{"model.json": r.model, "plan.json": doc} {
			b, err := marshal(v)
			if err != nil {
				l.Errorf(name, 0, 0, "", "encode: %v", err)
				return nil, l
			}
			files[name] = b
		}
		return files, l
	}
	in := r.renderInput()
	in.Plan = doc
	files, fl := render.Files(ctx, in)
	l = append(l, r.plan.LocatePatches(r.model, fl)...)
	l.Sort()
	return files, l
}

// Run renders cl into dir, replacing a previous render atomically; on any error
// dir is left as it was.
func (a *Render) Run(ctx context.Context, cl *config.Cluster, dir string) diag.List {
	files, l := a.Files(ctx, cl)
	if l.HasFatal() {
		return l
	}
	return append(l, render.WriteFiles(ctx, dir, files)...)
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// maxRenderedFile bounds a file of a previous render that diff reads.
const maxRenderedFile = 64 << 20
