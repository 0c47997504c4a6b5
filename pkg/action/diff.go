package action

import (
	"bytes"
	"context"
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
)

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
