package action

import (
	"context"
	"encoding/json"
	"io/fs"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// CatalogIndex builds a catalog's index.yaml from the package archives in a directory,
// to be served over HTTP beside them (see [source.HTTPCatalog]).
type CatalogIndex struct {
	cfg *Config
	// Output is the index file to write; DIR/index.yaml when empty. A name ending in
	// .json writes the index as JSON, which catalogs decode several times faster.
	Output string
	// BaseURL, when set, makes every archive URL absolute: BaseURL/PATH. Otherwise
	// URLs are relative to the index, which must then be served from DIR.
	BaseURL string
}

// NewCatalogIndex returns a CatalogIndex action.
func NewCatalogIndex(cfg *Config) *CatalogIndex { return &CatalogIndex{cfg: cfg} }

// Run checks every archive (*.tgz) below dir whole, as lint does, and writes the
// index of those that are valid: entries by name, newest first, deterministic for
// the same archives. The same name and version in two archives is an error naming
// both. Nothing is written when any problem is fatal.
func (a *CatalogIndex) Run(ctx context.Context, dir string) (*source.CatalogIndex, string, diag.List) {
	var l diag.List
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && strings.HasSuffix(p, archive.Ext) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		l.Errorf(dir, 0, 0, "", "cannot read the catalog directory: %v", unwrapPathErr(err))
		return nil, "", l
	}
	if len(files) == 0 {
		l.Errorf(dir, 0, 0, "", "no package archives (*%s) in this directory or below it", archive.Ext)
		return nil, "", l
	}
	x := &source.CatalogIndex{APIVersion: source.IndexAPIVersion, Kind: source.IndexKind, Entries: map[string][]source.CatalogEntry{}}
	where := map[string]string{}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			l.Errorf(f, 0, 0, "", "%v", err)
			return nil, "", l
		}
		src := source.Archive(plugin.OriginUser, f)
		vs, sl := src.List(ctx)
		l = append(l, sl...)
		for _, v := range vs {
			pkg, pl := src.Fetch(ctx, v)
			l = append(l, pl...)
			if pkg == nil {
				continue
			}
			if prev, dup := where[pkg.ID()]; dup {
				l.Errorf(f, 0, 0, "", "plugin %s is also in %s; a catalog holds each name and version once", pkg.ID(), prev)
				continue
			}
			where[pkg.ID()] = f
			rel, _ := filepath.Rel(dir, f)
			u := filepath.ToSlash(rel)
			if a.BaseURL != "" {
				u = strings.TrimSuffix(a.BaseURL, "/") + "/" + u
			}
			x.Entries[pkg.Name] = append(x.Entries[pkg.Name], source.EntryOf(pkg, u))
		}
	}
	l.Sort()
	if l.HasFatal() {
		return nil, "", l
	}
	x.Sort()
	out := a.Output
	if out == "" {
		out = filepath.Join(dir, source.IndexFile)
	}
	// A .json index is JSON, which catalogs decode several times faster than YAML.
	marshal := yaml.Marshal
	if strings.EqualFold(filepath.Ext(out), ".json") {
		marshal = func(v any) ([]byte, error) { return json.MarshalIndent(v, "", " ") }
	}
	data, err := marshal(x)
	if err != nil {
		l.Errorf(dir, 0, 0, "", "cannot encode the index: %v", err)
		return nil, "", l
	}
	if err := writeFileAtomic(out, data); err != nil {
		l.Errorf(out, 0, 0, "", "cannot write the index: %v", err)
		return nil, "", l
	}
	a.cfg.logger().Debug("wrote catalog index", "file", out, "plugins", len(x.Entries))
	return x, out, l
}
