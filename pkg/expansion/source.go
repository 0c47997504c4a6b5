package expansion

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/oci"
)

// SourceOptions say how [OpenSourceSet] reads an expansion's source directory.
type SourceOptions struct {
	// WorkDir receives the plugins the manifest names by reference (at
	// PulledPluginPath under it, where CreateOptions.Pulled finds them again)
	// and the generated plugin of its node files and hooks; the caller
	// removes it.
	WorkDir string
	// Plugins pulls plugin archives named by reference; nil when the manifest
	// names none.
	Plugins *oci.Client
	// Limits bound the source directory.
	Limits Limits
}

// OpenSourceSet is the Set of the one expansion whose source directory is src,
// not packed yet (no checksums, nothing verified): what `expansion create`
// merges into the cluster before it renders it, so that the images it packs
// are those of the cluster as the expansion changes it — the plugins it
// enables included, the ones it skips left out — exactly as `up` will render
// it with the packed expansion. Its plugins named by reference are pulled into
// opts.WorkDir and checked against their digests.
func OpenSourceSet(ctx context.Context, src string, opts SourceOptions) (*Set, diag.List) {
	abs, err := filepath.Abs(src)
	if err != nil {
		var l diag.List
		l.Errorf(src, 0, 0, "", "%v", err)
		return nil, l
	}
	pkg, l := OpenSource(ctx, abs, opts.Limits)
	if pkg == nil || pkg.Manifest == nil || l.HasFatal() {
		return nil, l
	}
	for i, p := range pkg.Manifest.Spec.Plugins {
		if p.Ref == "" {
			continue
		}
		dst := filepath.Join(opts.WorkDir, filepath.FromSlash(PulledPluginPath(p.Digest)))
		if err := pullPlugin(ctx, opts.Plugins, p.Ref, p.Digest, dst); err != nil {
			pkg.doc.Errorf(&l, fmt.Sprintf("/spec/plugins/%d/ref", i), "%v", err)
			return nil, l
		}
	}
	ld := &Loaded{Package: pkg, Root: abs, pulled: opts.WorkDir}
	return &Set{Expansions: []*Loaded{ld}, work: opts.WorkDir}, l
}

// pulledRoot is the directory under which e's plugins named by reference are
// (at PulledPluginPath): its own root, unless it is a source not packed yet.
func (e *Loaded) pulledRoot() string {
	if e.pulled != "" {
		return e.pulled
	}
	return e.Root
}
