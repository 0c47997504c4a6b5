package action

import (
	"context"
	"os"
	"path/filepath"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// Lint checks plugin packages.
type Lint struct {
	cfg *Config
}

// NewLint returns a Lint action.
func NewLint(cfg *Config) *Lint { return &Lint{cfg: cfg} }

// Run checks each path: a package directory (it holds plugin.yaml), a tree of
// packages, or a package archive (a file, see [Package]). It returns how many packages it checked and every problem found in all of them.
func (a *Lint) Run(ctx context.Context, dirs ...string) (int, diag.List) {
	var l diag.List
	n := 0
	for _, dir := range dirs {
		if err := ctx.Err(); err != nil {
			l.Errorf(dir, 0, 0, "", "%v", err)
			break
		}
		fi, err := os.Stat(dir)
		switch {
		case err != nil:
			l.Errorf(dir, 0, 0, "", "cannot read the plugin directory: %v", unwrapPathErr(err))
			continue
		case fi.Mode().IsRegular():
			// An archive: unpacked with its checks, then checked whole.
			src := source.Archive(plugin.OriginUser, dir)
			vs, sl := src.List(ctx)
			l = append(l, sl...)
			for _, v := range vs {
				pkg, pl := src.Fetch(ctx, v)
				l = append(l, pl...)
				if pkg != nil {
					n++
				}
			}
			continue
		case !fi.IsDir():
			l.Errorf(dir, 0, 0, "", "expected a plugin directory (holding %s) or a package archive, found a %s", plugin.ManifestFile, fi.Mode().Type())
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, plugin.ManifestFile)); err == nil {
			a.cfg.logger().Debug("linting plugin", "dir", dir)
			_, pl := plugin.Load(os.DirFS(dir), plugin.OriginUser, filepath.Clean(dir))
			l = append(l, pl...)
			n++
			continue
		}
		// A tree: every package in it, whole; duplicates are no lint problem.
		src := source.Dir(plugin.OriginUser, dir)
		vs, sl := src.List(ctx)
		l = append(l, sl...)
		if len(vs) == 0 && len(sl) == 0 {
			l.Errorf(dir, 0, 0, "", "no %s found in this directory or below it", plugin.ManifestFile)
		}
		for _, v := range vs {
			pkg, pl := src.Fetch(ctx, v)
			l = append(l, pl...)
			if pkg != nil {
				n++
			}
		}
	}
	l.Sort()
	return n, l
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok { //nolint:errorlint // os.Stat returns *PathError unwrapped
		return pe.Err
	}
	return err
}
