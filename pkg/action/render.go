package action

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/kubeplug/kubeplug/internal/bounded"
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
	l := r.pipeline(ctx, append([]step{resolveStep}, through(until)...)...)
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

// Diff compares what a render would write with a directory.
type Diff struct {
	render *Render
}

// NewDiff returns a Diff action.
func NewDiff(cfg *Config) *Diff { return &Diff{render: NewRender(cfg)} }

// FileDiff is how one rendered file would change.
type FileDiff struct {
	// Path is the file's path in the render, with forward slashes.
	Path string `json:"path"`
	// Change is added, removed or modified.
	Change string `json:"change"`
	// Diff is the file's unified diff (a/PATH against b/PATH).
	Diff string `json:"diff"`
}

// Run renders cl in memory and returns a unified diff against dir (empty when
// nothing would change): the Diff of every file Files returns.
func (a *Diff) Run(ctx context.Context, cl *config.Cluster, dir string) (string, diag.List) {
	files, l := a.Files(ctx, cl, dir)
	var out strings.Builder
	for _, f := range files {
		out.WriteString(f.Diff)
	}
	return out.String(), l
}

// Files renders cl in memory and compares it with dir, file by file in path
// order: the files that would change (none when nothing would). Both sides
// are redacted renders, so no sensitive value can appear.
func (a *Diff) Files(ctx context.Context, cl *config.Cluster, dir string) ([]FileDiff, diag.List) {
	// Only a directory that render wrote: anything else would be printed into
	// the diff (a home directory, /etc).
	if fi, err := os.Lstat(filepath.Join(dir, render.MarkerFile)); err != nil || !fi.Mode().IsRegular() {
		var l diag.List
		l.Errorf(dir, 0, 0, "", "refusing to compare with %s: it has no %s, so it is not a directory that kubeplug render wrote", dir, render.MarkerFile)
		return nil, l
	}
	files, l := a.render.Files(ctx, cl)
	if l.HasFatal() {
		return nil, l
	}
	old := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == render.MarkerFile {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is a %s; a render holds regular files only", rel, d.Type())
		}
		b, err := bounded.ReadFile(p, maxRenderedFile)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		old[rel] = b
		return nil
	})
	if err != nil {
		l.Errorf(dir, 0, 0, "", "cannot read the previous render: %v", err)
		return nil, l
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	for n := range old {
		if _, ok := files[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := []FileDiff{}
	for _, n := range names {
		a, b := old[n], files[n]
		if bytes.Equal(a, b) {
			continue
		}
		from, to, change := "a/"+n, "b/"+n, "modified"
		if _, ok := old[n]; !ok {
			from, change = "/dev/null", "added"
		}
		if _, ok := files[n]; !ok {
			to, change = "/dev/null", "removed"
		}
		text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
			FromFile: from, ToFile: to, Context: 3,
		})
		if err != nil {
			l.Errorf(n, 0, 0, "", "diff: %v", err)
			continue
		}
		out = append(out, FileDiff{Path: n, Change: change, Diff: text})
	}
	return out, l
}
