package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// OriginCatalog is the origin of remote catalogs: above the contrib directory, below
// user directories, so that a package being worked on locally shadows the published
// one.
var OriginCatalog = plugin.Origin{Name: "catalog", Rank: 150}

// Catalog index format.
const (
	// IndexAPIVersion and IndexKind identify a catalog index file.
	IndexAPIVersion = "kubeplug.dev/v1alpha1"
	IndexKind       = "PluginIndex"
	// IndexFile is the conventional name of a catalog's index.
	IndexFile = "index.yaml"
	// MaxIndexSize bounds an index document.
	MaxIndexSize = 64 << 20
	// DefaultHTTPTimeout bounds one request of an HTTP catalog when
	// [HTTPOptions.Timeout] is zero.
	DefaultHTTPTimeout = 30 * time.Second
)

// CatalogIndex is a catalog's index.yaml, like a Helm repository's index: every
// version of every plugin with what the resolver reads, its package digest and where
// its archive is. A resolver picks versions from the index alone; only the picked
// archives are downloaded.
type CatalogIndex struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Entries are the versions by plugin name, newest first.
	Entries map[string][]CatalogEntry `json:"entries"`
}

// CatalogEntry is one version of one plugin in a [CatalogIndex]. Its fields repeat the
// package's plugin.yaml (which must agree once downloaded) and say where it is.
type CatalogEntry struct {
	Version           string                `json:"version"`
	Description       string                `json:"description,omitempty"`
	KubernetesVersion string                `json:"kubernetesVersion,omitempty"`
	Providers         []string              `json:"providers,omitempty"`
	Requires          []v1alpha1.Dependency `json:"requires,omitempty"`
	Conflicts         []string              `json:"conflicts,omitempty"`
	After             []string              `json:"after,omitempty"`
	Before            []string              `json:"before,omitempty"`
	// Digest is the package digest ([plugin.Package.Digest]); a download whose
	// package has another digest is refused.
	Digest string `json:"digest"`
	// URLs locate the archive, relative to the index's URL or absolute; the first
	// is used.
	URLs []string `json:"urls"`
}

// EntryOf returns the index entry of a loaded package whose archive is at u.
func EntryOf(p *plugin.Package, u string) CatalogEntry {
	m, s := p.Manifest, p.Manifest.Spec
	return CatalogEntry{
		Version: m.Metadata.Version, Description: m.Metadata.Description,
		KubernetesVersion: s.KubernetesVersion, Providers: s.Providers, Requires: s.Requires,
		Conflicts: s.Conflicts, After: s.After, Before: s.Before,
		Digest: p.Digest, URLs: []string{u},
	}
}

// Sort orders each plugin's entries newest first (unparsable versions last).
func (x *CatalogIndex) Sort() {
	for _, es := range x.Entries {
		slices.SortStableFunc(es, func(a, b CatalogEntry) int {
			va, ea := semver.StrictNewVersion(a.Version)
			vb, eb := semver.StrictNewVersion(b.Version)
			switch {
			case ea != nil || eb != nil:
				return boolCmp(ea != nil, eb != nil)
			}
			return vb.Compare(va)
		})
	}
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// Versions checks the index and returns its versions, at the archive URLs resolved
// against base (located as HOST/PATH). Broken entries (a bad name, version, constraint or digest,
// no URL, a version twice) are fatal diagnostics located at location and left out.
func (x *CatalogIndex) Versions(origin plugin.Origin, base *url.URL, location string) ([]*Version, diag.List) {
	var l diag.List
	// Broken entries are reported one by one up to MaxIndexErrors, then counted:
	// an index of a million broken entries is one screen of errors, not 100 MB.
	broken := 0
	errorf := func(field, format string, args ...any) {
		if broken++; broken <= MaxIndexErrors {
			l.Errorf(location, 0, 0, field, format, args...)
		}
	}
	if x.APIVersion != IndexAPIVersion || x.Kind != IndexKind {
		l.Errorf(location, 0, 0, "", "not a plugin catalog index: expected apiVersion %s and kind %s, found %q and %q", IndexAPIVersion, IndexKind, x.APIVersion, x.Kind)
		return nil, l
	}
	var out []*Version
	names := make([]string, 0, len(x.Entries))
	for n := range x.Entries {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		seen := map[string]bool{}
		for i, e := range x.Entries[name] {
			field := fmt.Sprintf("entries.%s[%d]", name, i)
			if msg := entryProblem(name, e); msg != "" {
				errorf(field, "%s", msg)
				continue
			}
			if seen[e.Version] {
				errorf(field, "plugin %s@%s is listed twice in the index", name, e.Version)
				continue
			}
			seen[e.Version] = true
			ref, err := base.Parse(e.URLs[0])
			if err != nil {
				errorf(field+".urls[0]", "invalid URL %q: %v", redact.URL(e.URLs[0]), redact.URLError(err))
				continue
			}
			if msg := entryTransport(base, ref); msg != "" {
				errorf(field+".urls[0]", "plugin %s@%s: %s", name, e.Version, msg)
				continue
			}
			v := versionOf(&v1alpha1.Plugin{
				Metadata: v1alpha1.PluginMetadata{Name: name, Version: e.Version, Description: e.Description},
				Spec: v1alpha1.PluginSpec{
					KubernetesVersion: e.KubernetesVersion, Providers: e.Providers, Requires: e.Requires,
					Conflicts: e.Conflicts, After: e.After, Before: e.Before,
				},
			}, origin, locationOf(ref))
			v.Digest, v.Ref = e.Digest, ref
			out = append(out, v)
		}
	}
	if broken > MaxIndexErrors {
		l.Errorf(location, 0, 0, "entries", "and %s more broken entries (%s in all; the first %d are shown)", thousands(broken-MaxIndexErrors), thousands(broken), MaxIndexErrors)
	}
	return out, l
}

// thousands renders n with thousands separators: 999,990.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// entryTransport says why an entry's archive URL may not be fetched for the
// catalog at base; "" when it may. An HTTP catalog's entries obey the transport
// policy of the index URL itself (https, or plain http to loopback only), so an
// index cannot downgrade a download; an OCI catalog's entries are oci:// refs.
func entryTransport(base, ref *url.URL) string {
	if base.Scheme == "oci" {
		if ref.Scheme != "oci" {
			return fmt.Sprintf("archive URL %s: an OCI catalog's entries are oci:// references", redact.URL(ref.String()))
		}
		return ""
	}
	if err := oci.CheckTransport(ref); err != nil {
		return "archive URL " + err.Error()
	}
	return ""
}

// locationOf names a downloaded package in diagnostics and listings: the archive's
// URL without its scheme, since diagnostics join file names to it as a path.
func locationOf(u *url.URL) string { return u.Host + u.Path }

// entryProblem says what is wrong with an entry; "" when nothing.
func entryProblem(name string, e CatalogEntry) string {
	if !plugin.NameRE.MatchString(name) || len(name) > 63 {
		return fmt.Sprintf("plugin name %q is not a DNS label", name)
	}
	if _, err := semver.StrictNewVersion(e.Version); err != nil {
		return fmt.Sprintf("plugin %s: version %q is not a semantic version", name, e.Version)
	}
	if e.KubernetesVersion != "" {
		if _, err := semver.NewConstraint(e.KubernetesVersion); err != nil {
			return fmt.Sprintf("plugin %s@%s: kubernetesVersion %q is not a version constraint", name, e.Version, e.KubernetesVersion)
		}
	}
	for _, r := range e.Requires {
		if !plugin.NameRE.MatchString(r.Name) {
			return fmt.Sprintf("plugin %s@%s requires %q, which is not a plugin name", name, e.Version, r.Name)
		}
		if r.Version != "" {
			if _, err := semver.NewConstraint(r.Version); err != nil {
				return fmt.Sprintf("plugin %s@%s requires %s %q, which is not a version constraint", name, e.Version, r.Name, r.Version)
			}
		}
	}
	if !digestRE.MatchString(e.Digest) {
		return fmt.Sprintf("plugin %s@%s: digest %q is not sha256: and 64 hex digits", name, e.Version, e.Digest)
	}
	if len(e.URLs) == 0 || e.URLs[0] == "" {
		return fmt.Sprintf("plugin %s@%s has no URL", name, e.Version)
	}
	return ""
}

// CheckCatalogURL checks the URL of a catalog's index: https, or plain http to a
// loopback address (a local test server), or oci://HOST/PREFIX, a repository prefix
// in an OCI registry (plain HTTP for loopback registries).
func CheckCatalogURL(raw string) error {
	shown := redact.URL(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return redact.URLError(fmt.Errorf("invalid catalog URL %q: %w", shown, err))
	}
	switch {
	case u.Scheme == "oci":
		r, err := oci.ParseRef(raw)
		if err != nil {
			return redact.URLError(fmt.Errorf("catalog %s: %w", shown, err))
		}
		if r.Reference != "" {
			return fmt.Errorf("catalog %s: an OCI catalog is a repository prefix, without a tag or digest", shown)
		}
		return nil
	case u.Scheme == "https" && u.Host != "":
		return nil
	case u.Scheme == "http" && oci.IsLoopback(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("catalog %s: plain http is accepted for loopback addresses only; use https", shown)
	}
	return fmt.Errorf("catalog %q: expected an https:// URL of an %s", shown, IndexFile)
}

// HTTPOptions configure an HTTP catalog.
type HTTPOptions struct {
	// Client makes the requests; http.DefaultClient when nil (its TLS roots are the
	// system's, or $SSL_CERT_FILE's).
	Client *http.Client
	// Timeout bounds each request; DefaultHTTPTimeout when zero.
	Timeout time.Duration
	// Cache, when set, keeps downloaded archives by digest and serves them again
	// without the network (see [Cache]).
	Cache *Cache
	// Pinned are package digests (a lock file's) that may be listed from the cache
	// alone when the index cannot be read: with a lock file and a warm cache, a
	// catalog works offline. Each is listed with the manifest of its cached archive.
	Pinned []string
	// CAFiles are PEM files of certificate authorities trusted besides the
	// system's; with them, Client is built to trust them (an unreadable file is
	// an error of the source's first request, naming it).
	CAFiles []string
	// RegistryConfig is the docker config file of an oci:// catalog's
	// credentials; empty means the usual one.
	RegistryConfig string
	// Keyring is a PGP keyring file that Helm charts' provenance files must be
	// signed with (a type: helm source's verify.keyring); empty checks none.
	// ProvenanceRequired refuses a chart without a provenance file.
	Keyring            string
	ProvenanceRequired bool
	// SignatureKeys are cosign public key files that OCI charts must be signed
	// with, as `cosign sign` stores signatures (an oci:// source's verify.keys);
	// empty checks none. SignatureRequired refuses an OCI chart without one.
	SignatureKeys     []string
	SignatureRequired bool
}

// httpCatalog is a catalog served over HTTP(S): an index.yaml and archives.
type httpCatalog struct {
	origin plugin.Origin
	index  string
	// shown is index with its password masked: what messages print.
	shown string
	opts  HTTPOptions
	// caErr is why the CA files could not be read: every request fails with it.
	caErr error
}

// HTTPCatalog returns the catalog whose index is at indexURL (an index.yaml, see
// [CatalogIndex]) as a source of the given origin (usually [OriginCatalog]). List
// downloads the index only; Fetch downloads the archive of a picked version, unpacks
// it with the checks of [archive.Extract] and loads it; [Index.Fetch] then refuses a
// package whose digest or resolver fields differ from the index entry, naming both.
func HTTPCatalog(origin plugin.Origin, indexURL string, opts HTTPOptions) Source {
	var caErr error
	if opts.Client == nil && len(opts.CAFiles) > 0 {
		opts.Client, caErr = clientTrusting(opts.CAFiles)
	}
	if opts.Client == nil {
		opts.Client = http.DefaultClient
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultHTTPTimeout
	}
	return &httpCatalog{origin: origin, index: indexURL, shown: redact.URL(indexURL), opts: opts, caErr: caErr}
}

// clientTrusting is an HTTP client trusting the system's roots and the CAs in files.
func clientTrusting(files []string) (*http.Client, error) {
	pool := oci.SystemRoots()
	for _, f := range files {
		pem, err := bounded.ReadFileAs("CA file", f, oci.MaxCAFileSize)
		if err != nil {
			return nil, err
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate in it", f)
		}
	}
	return &http.Client{Transport: oci.TransportTrusting(pool)}, nil
}

// String names the source in logs.
func (s *httpCatalog) String() string { return s.origin.Name + " " + s.shown }

// List implements [Source].
func (s *httpCatalog) List(ctx context.Context) ([]*Version, diag.List) {
	var l diag.List
	if err := CheckCatalogURL(s.index); err != nil {
		l.Errorf(s.shown, 0, 0, "", "%v", err)
		return nil, l
	}
	base, err := url.Parse(s.index)
	if err != nil {
		l.Errorf(s.shown, 0, 0, "", "invalid catalog URL: %v", redact.URLError(err))
		return nil, l
	}
	data, err := s.get(ctx, s.index, MaxIndexSize)
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
	return x.Versions(s.origin, base, s.shown)
}

// pinned lists the pinned packages whose archives are in the cache and still give
// their digest.
func (s *httpCatalog) pinned() []*Version {
	var out []*Version
	for _, d := range s.opts.Pinned {
		data, err := s.opts.Cache.Get(d)
		if err != nil {
			continue
		}
		fsys, err := archive.Extract(bytes.NewReader(data), archive.Limits{})
		if err != nil {
			continue
		}
		if got, err := plugin.Digest(fsys); err != nil || got != d {
			continue
		}
		loc := "cache/" + d
		m, ml := plugin.ReadManifest(fsys, loc)
		if m == nil || ml.HasFatal() {
			continue
		}
		v := versionOf(m.Plugin, s.origin, loc)
		v.Digest, v.Ref = d, &url.URL{Scheme: "cache", Opaque: d}
		out = append(out, v)
	}
	return out
}

// Fetch implements [Source].
func (s *httpCatalog) Fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List) {
	var l diag.List
	u, ok := v.Ref.(*url.URL)
	if !ok {
		l.Errorf(v.Location, 0, 0, "", "plugin %s was not listed by the catalog %s", v.ID(), s.shown)
		return nil, l
	}
	// A cached archive is used when it still gives the announced digest; one that
	// does not (corrupted on disk) is dropped and downloaded again.
	if data, err := s.opts.Cache.Get(v.Digest); err == nil {
		if pkg, pl := s.load(data, v); pkg != nil && pkg.Digest == v.Digest && !pl.HasFatal() {
			return pkg, pl
		}
		s.opts.Cache.Remove(v.Digest)
	}
	data, err := s.get(ctx, u.String(), plugin.MaxPackageSize)
	if err != nil {
		l.Errorf(v.Location, 0, 0, "", "cannot download plugin %s: %v", v.ID(), err)
		return nil, l
	}
	pkg, pl := s.load(data, v)
	if pkg != nil && pkg.Digest == v.Digest && !pl.HasFatal() {
		if err := s.opts.Cache.Put(v.Digest, data); err != nil {
			pl.Warnf(v.Location, 0, 0, "", "cannot cache plugin %s: %v", v.ID(), err)
		}
	}
	return pkg, pl
}

// load unpacks and loads a downloaded archive.
func (s *httpCatalog) load(data []byte, v *Version) (*plugin.Package, diag.List) {
	fsys, err := archive.Extract(bytes.NewReader(data), archive.Limits{})
	if err != nil {
		var l diag.List
		l.Errorf(v.Location, 0, 0, "", "cannot unpack plugin %s: %v", v.ID(), err)
		return nil, l
	}
	return plugin.Load(fsys, s.origin, v.Location)
}

// get reads url whole, at most limit bytes, within the timeout. The URL and
// every redirect obey the transport policy ([oci.CheckTransport]); errors print
// the URL with its password masked.
func (s *httpCatalog) get(ctx context.Context, u string, limit int64) ([]byte, error) {
	data, err := s.getRaw(ctx, u, limit)
	return data, redact.URLError(err)
}

func (s *httpCatalog) getRaw(ctx context.Context, u string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	shown := redact.URL(u)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if err := oci.CheckTransport(req.URL); err != nil {
		return nil, err
	}
	if s.caErr != nil {
		return nil, s.caErr
	}
	c := *s.opts.Client // a copy: the caller's client keeps its own policy
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := oci.CheckRedirect(req, via); err != nil {
			return err
		}
		if s.opts.Client.CheckRedirect != nil {
			return s.opts.Client.CheckRedirect(req, via)
		}
		return nil
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", shown, resp.Status)
	}
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("GET %s: the response is %s, more than the %s limit", shown, bounded.Size(resp.ContentLength), bounded.Size(limit))
	}
	data, err := bounded.Read(resp.Body, limit)
	if errors.Is(err, bounded.ErrTooLarge) {
		return nil, fmt.Errorf("GET %s: the response is more than the %s limit", shown, bounded.Size(limit))
	}
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", shown, err)
	}
	return data, nil
}
