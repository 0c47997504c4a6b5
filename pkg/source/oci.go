package source

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// OpenCatalog returns the catalog at raw: an OCI catalog for oci://HOST/PREFIX, an HTTP
// catalog for an index URL.
func OpenCatalog(origin plugin.Origin, raw string, opts HTTPOptions) Source {
	if strings.HasPrefix(raw, oci.Scheme) {
		return OCICatalog(origin, raw, opts)
	}
	return HTTPCatalog(origin, raw, opts)
}

// ociCatalog is a catalog in an OCI registry: each plugin the repository PREFIX/NAME,
// tagged by version, and the index an artifact tagged [oci.IndexTag] in PREFIX (so
// that listing does not depend on the registry's _catalog).
type ociCatalog struct {
	httpCatalog
	prefix string
}

// OCICatalog returns the catalog under oci://HOST/PREFIX as a source. Its index entries
// name the archives as oci://HOST/PREFIX/NAME@sha256:MANIFEST. Credentials come from
// the docker config file; a loopback registry is spoken to in plain HTTP, as loopback
// HTTP catalogs are. Opts' Timeout, Cache and Pinned work as for [HTTPCatalog]; its
// Client is not used.
func OCICatalog(origin plugin.Origin, prefix string, opts HTTPOptions) Source {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultHTTPTimeout
	}
	return &ociCatalog{httpCatalog: httpCatalog{origin: origin, index: prefix, shown: redact.URL(prefix), opts: opts}, prefix: prefix}
}

func (s *ociCatalog) client() (*oci.Client, error) {
	return ociClientFor(s.prefix, s.opts)
}

// ociClientFor is the client for the registry of ref: plain HTTP on loopback
// (oci.IsLoopback, as for loopback HTTP catalogs); the catalog's CA files and
// credentials file.
func ociClientFor(ref string, opts HTTPOptions) (*oci.Client, error) {
	if _, err := oci.ParseRef(ref); err != nil {
		return nil, err
	}
	return oci.New(oci.Options{Timeout: opts.Timeout, CAFiles: opts.CAFiles, RegistryConfig: opts.RegistryConfig})
}

// List implements [Source].
func (s *ociCatalog) List(ctx context.Context) ([]*Version, diag.List) {
	var l diag.List
	if err := CheckCatalogURL(s.prefix); err != nil {
		l.Errorf(s.shown, 0, 0, "", "%v", err)
		return nil, l
	}
	c, err := s.client()
	if err != nil {
		l.Errorf(s.shown, 0, 0, "", "%v", err)
		return nil, l
	}
	data, found, err := c.FetchIndex(ctx, s.prefix)
	if err == nil && !found {
		l.Errorf(s.shown, 0, 0, "", "the OCI catalog has no index (%s:%s); publish one with 'kubeplug plugin push --index'", strings.TrimPrefix(s.prefix, oci.Scheme), oci.IndexTag)
		return nil, l
	}
	if err != nil {
		if vs := s.pinned(); len(vs) > 0 && ctx.Err() == nil {
			l.Warnf(s.shown, 0, 0, "", "cannot read the catalog index (%v); listing the %d locked packages found in the cache", err, len(vs))
			return vs, l
		}
		l.Errorf(s.shown, 0, 0, "", "cannot read the catalog index: %v", err)
		return nil, l
	}
	x, err := DecodeIndex(data)
	if err != nil {
		l.Errorf(s.shown, 0, 0, "", "cannot decode the catalog index: %v", err)
		return nil, l
	}
	base, err := url.Parse(strings.TrimSuffix(s.prefix, "/") + "/")
	if err != nil {
		l.Errorf(s.shown, 0, 0, "", "invalid catalog: %v", err)
		return nil, l
	}
	return x.Versions(s.origin, base, s.shown)
}

// Fetch implements [Source].
func (s *ociCatalog) Fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List) {
	var l diag.List
	u, ok := v.Ref.(*url.URL)
	if !ok {
		l.Errorf(v.Location, 0, 0, "", "plugin %s was not listed by the catalog %s", v.ID(), s.shown)
		return nil, l
	}
	if data, err := s.opts.Cache.Get(v.Digest); err == nil {
		if pkg, pl := s.load(data, v); pkg != nil && pkg.Digest == v.Digest && !pl.HasFatal() {
			return pkg, pl
		}
		s.opts.Cache.Remove(v.Digest)
	}
	c, err := s.client()
	if err != nil {
		l.Errorf(v.Location, 0, 0, "", "%v", err)
		return nil, l
	}
	ctx, cancel := context.WithTimeout(ctx, 4*s.opts.Timeout)
	defer cancel()
	p, err := c.Pull(ctx, u.String())
	if err != nil {
		l.Errorf(v.Location, 0, 0, "", "cannot download plugin %s: %v", v.ID(), err)
		return nil, l
	}
	pkg, pl := s.load(p.Archive, v)
	if pkg != nil && pkg.Digest == v.Digest && !pl.HasFatal() {
		if err := s.opts.Cache.Put(v.Digest, p.Archive); err != nil {
			pl.Warnf(v.Location, 0, 0, "", "cannot cache plugin %s: %v", v.ID(), err)
		}
	}
	return pkg, pl
}

// PushToCatalog pushes the archive file to the OCI catalog prefix (see [oci.Client.Push])
// and adds it to the catalog's index, creating the index when there is none. An entry
// for the same version is replaced. Two pushes to one catalog at the same time may
// lose one index entry: publish from one place (a CI job) at a time.
func PushToCatalog(ctx context.Context, c *oci.Client, file, prefix string) (*oci.Pushed, error) {
	fsys, err := openArchive(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	pkg, l := plugin.Load(fsys, OriginCatalog, file)
	if pkg == nil || l.HasFatal() {
		return nil, fmt.Errorf("%s: %w", file, l.Err())
	}
	x := &CatalogIndex{APIVersion: IndexAPIVersion, Kind: IndexKind, Entries: map[string][]CatalogEntry{}}
	data, found, err := c.FetchIndex(ctx, prefix)
	if err != nil {
		return nil, err
	}
	if found {
		if x, err = DecodeIndex(data); err != nil {
			return nil, fmt.Errorf("%s: cannot decode the catalog index: %w", prefix, err)
		}
		if x.Entries == nil {
			x.Entries = map[string][]CatalogEntry{}
		}
	}
	p, err := c.Push(ctx, file, prefix)
	if err != nil {
		return nil, err
	}
	e := EntryOf(pkg, strings.TrimSuffix(prefix, "/")+"/"+p.Name+"@"+p.Manifest)
	es := slices.DeleteFunc(x.Entries[p.Name], func(o CatalogEntry) bool { return o.Version == e.Version })
	x.Entries[p.Name] = append(es, e)
	x.Sort()
	out, err := json.Marshal(x)
	if err != nil {
		return nil, err
	}
	if _, err := c.PushIndex(ctx, prefix, out); err != nil {
		return nil, err
	}
	return p, nil
}

// RebuildOCIIndex builds the index of the OCI catalog prefix from the registry itself:
// every version tag of every plugin the current index names, plus names, each pulled
// and checked as a catalog fetch would be. It repairs an index that lost an entry
// (two pushes at once) without relying on the registry's _catalog.
func RebuildOCIIndex(ctx context.Context, c *oci.Client, prefix string, names []string) (*CatalogIndex, error) {
	data, found, err := c.FetchIndex(ctx, prefix)
	if err != nil {
		return nil, err
	}
	all := slices.Clone(names)
	if found {
		x, err := DecodeIndex(data)
		if err != nil {
			return nil, fmt.Errorf("%s: cannot decode the catalog index: %w", prefix, err)
		}
		for n := range x.Entries {
			all = append(all, n)
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if len(all) == 0 {
		return nil, fmt.Errorf("%s has no index and no plugin was named (--plugin NAME)", prefix)
	}
	base := strings.TrimSuffix(prefix, "/")
	out := &CatalogIndex{APIVersion: IndexAPIVersion, Kind: IndexKind, Entries: map[string][]CatalogEntry{}}
	for _, n := range all {
		tags, err := c.Tags(ctx, base+"/"+n)
		if err != nil {
			return nil, err
		}
		for _, t := range tags {
			if _, err := semver.StrictNewVersion(t); err != nil {
				continue // not a version tag (a signature fallback index, say)
			}
			p, err := c.Pull(ctx, base+"/"+n+":"+t)
			if err != nil {
				return nil, err
			}
			fsys, err := archive.Extract(bytes.NewReader(p.Archive), archive.Limits{})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Ref, err)
			}
			pkg, l := plugin.Load(fsys, OriginCatalog, p.Ref)
			if pkg == nil || l.HasFatal() {
				return nil, fmt.Errorf("%s: %w", p.Ref, l.Err())
			}
			out.Entries[n] = append(out.Entries[n], EntryOf(pkg, base+"/"+n+"@"+p.Manifest))
		}
	}
	out.Sort()
	return out, nil
}
