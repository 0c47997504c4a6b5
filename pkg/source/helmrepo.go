package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing/fstest"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// SourceTypeHelm is the type of a catalog source that is a Helm chart repository.
const SourceTypeHelm = "helm"

// HelmChartFile is where, inside the package a Helm repository source makes of a
// chart version, the chart's archive is.
const HelmChartFile = "chart.tgz"

// helmIndex is the part of a Helm repository's index.yaml a source reads.
type helmIndex struct {
	APIVersion string                        `json:"apiVersion"`
	Entries    map[string][]helmIndexVersion `json:"entries"`
}

type helmIndexVersion struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Description string   `json:"description,omitempty"`
	KubeVersion string   `json:"kubeVersion,omitempty"`
	Digest      string   `json:"digest,omitempty"`
	URLs        []string `json:"urls"`
	Deprecated  bool     `json:"deprecated,omitempty"`
}

// helmRef is a listed chart version's handle: where its archive is and the
// sha256 (hex) the index gives for it.
type helmRef struct {
	url    *url.URL
	digest string
	// cached is the package digest the package is cached under when the
	// version was listed from the cache alone (the repository could not be
	// read); url is nil then.
	cached string
}

var hexDigestRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// helmRepo is a Helm chart repository as a catalog: each chart version is a plugin
// version whose package installs the chart as a release.
type helmRepo struct {
	httpCatalog
}

// HelmRepository returns the Helm chart repository at repoURL (its index.yaml, or
// the repository URL the index.yaml is under) as a source: every version of every
// chart in its index is a plugin version of the chart's name, with the chart's
// kubeVersion as its kubernetesVersion. Fetch downloads the chart archive (bounded,
// under the transport policy and CA files of [HTTPCatalog]), refuses one whose
// sha256 is not the index's digest or whose Chart.yaml names another chart or
// version, and makes it a package: the archive and a plugin.yaml installing it as
// release NAME in namespace NAME, the plugin's values being the chart's values.
// Archives are cached by their sha256 in opts.Cache.
func HelmRepository(origin plugin.Origin, repoURL string, opts HTTPOptions) Source {
	idx := repoURL
	if !strings.HasSuffix(idx, ".yaml") && !strings.HasSuffix(idx, ".yml") {
		idx = strings.TrimSuffix(idx, "/") + "/" + IndexFile
	}
	c := HTTPCatalog(origin, idx, opts).(*httpCatalog)
	return &helmRepo{httpCatalog: *c}
}

// String names the source in logs.
func (s *helmRepo) String() string { return s.origin.Name + " helm " + s.shown }

// List implements [Source].
func (s *helmRepo) List(ctx context.Context) ([]*Version, diag.List) {
	var l diag.List
	if err := CheckCatalogURL(s.index); err != nil || strings.HasPrefix(s.index, "oci:") {
		if err == nil {
			err = fmt.Errorf("a Helm repository is an https:// URL")
		}
		l.Errorf(s.shown, 0, 0, "", "%v", err)
		return nil, l
	}
	base, err := url.Parse(s.index)
	if err != nil {
		l.Errorf(s.shown, 0, 0, "", "invalid Helm repository URL: %v", redact.URLError(err))
		return nil, l
	}
	data, err := s.get(ctx, s.index, MaxIndexSize)
	if err != nil {
		if vs := s.pinnedCharts(); len(vs) > 0 && ctx.Err() == nil {
			l.Warnf(s.shown, 0, 0, "", "cannot read the Helm repository index (%v); listing the %d locked chart version(s) found in the cache", err, len(vs))
			return vs, l
		}
		l.Errorf(s.shown, 0, 0, "", "cannot read the Helm repository index: %v (with a kubeplug.lock pinning a chart version fetched before, it is listed from the cache)", err)
		return nil, l
	}
	var x helmIndex
	if err := yaml.Unmarshal(data, &x); err != nil {
		l.Errorf(s.shown, 0, 0, "", "cannot decode the Helm repository index: %v", err)
		return nil, l
	}
	if x.APIVersion != "v1" {
		l.Errorf(s.shown, 0, 0, "apiVersion", "not a Helm repository index: expected apiVersion v1, found %q", x.APIVersion)
		return nil, l
	}
	return x.versions(s.origin, base, s.shown)
}

// versions turns the index's entries into plugin versions, reporting broken ones
// (at most MaxIndexErrors, then a count) and leaving them out.
func (x *helmIndex) versions(origin plugin.Origin, base *url.URL, location string) ([]*Version, diag.List) {
	var l diag.List
	broken := 0
	errorf := func(field, format string, args ...any) {
		if broken++; broken <= MaxIndexErrors {
			l.Errorf(location, 0, 0, field, format, args...)
		}
	}
	names := make([]string, 0, len(x.Entries))
	for n := range x.Entries {
		names = append(names, n)
	}
	slices.Sort(names)
	// Most versions of a chart share its kubeVersion: parse each one once (a
	// constraint's regexps were a quarter of listing a 10,000-version index).
	constraints := map[string]*semver.Constraints{}
	constraint := func(s string) (*semver.Constraints, error) {
		if c, ok := constraints[s]; ok {
			return c, nil
		}
		c, err := semver.NewConstraint(s)
		if err == nil {
			constraints[s] = c
		}
		return c, err
	}
	var out []*Version
	for _, name := range names {
		seen := map[string]bool{}
		for i, e := range x.Entries[name] {
			field := fmt.Sprintf("entries.%s[%d]", name, i)
			if msg := helmEntryProblem(name, e, constraint); msg != "" {
				errorf(field, "%s", msg)
				continue
			}
			if e.Deprecated {
				continue
			}
			ver, err := semver.StrictNewVersion(e.Version)
			if err != nil {
				continue // checked above
			}
			if seen[ver.String()] {
				errorf(field, "chart %s %s is listed twice in the index", name, e.Version)
				continue
			}
			seen[ver.String()] = true
			ref, err := base.Parse(e.URLs[0])
			if err != nil {
				errorf(field+".urls[0]", "chart %s %s: invalid URL %q: %v", name, e.Version, redact.URL(e.URLs[0]), redact.URLError(err))
				continue
			}
			if msg := entryTransport(base, ref); msg != "" {
				errorf(field+".urls[0]", "chart %s %s: %s", name, e.Version, msg)
				continue
			}
			if ref.User == nil && ref.Host == base.Host && ref.Scheme == base.Scheme {
				// As helm does: the repository's credentials go with its archives
				// on the same host, never to another one.
				ref.User = base.User
			}
			v := &Version{Name: name, Version: ver, Description: e.Description, Origin: origin, Location: locationOf(ref)}
			if e.KubeVersion != "" {
				v.KubernetesVersion, _ = constraint(e.KubeVersion)
			}
			v.Ref = &helmRef{url: ref, digest: e.Digest}
			out = append(out, v)
		}
	}
	if broken > MaxIndexErrors {
		l.Errorf(location, 0, 0, "entries", "and %s more broken entries (%s in all; the first %d are shown)", thousands(broken-MaxIndexErrors), thousands(broken), MaxIndexErrors)
	}
	return out, l
}

// helmEntryProblem says what is wrong with a chart version of the index; "" when
// nothing. constraint parses a version constraint.
func helmEntryProblem(name string, e helmIndexVersion, constraint func(string) (*semver.Constraints, error)) string {
	if !plugin.NameRE.MatchString(name) || len(name) > 63 {
		return fmt.Sprintf("chart name %q is not a plugin name (a DNS label)", name)
	}
	if e.Name != "" && e.Name != name {
		return fmt.Sprintf("chart %s: an entry names chart %q", name, e.Name)
	}
	if _, err := semver.StrictNewVersion(e.Version); err != nil {
		return fmt.Sprintf("chart %s: version %q is not a semantic version", name, e.Version)
	}
	if e.KubeVersion != "" {
		if _, err := constraint(e.KubeVersion); err != nil {
			return fmt.Sprintf("chart %s %s: kubeVersion %q is not a version constraint", name, e.Version, e.KubeVersion)
		}
	}
	if !hexDigestRE.MatchString(e.Digest) {
		return fmt.Sprintf("chart %s %s: digest %q is not 64 hex digits (a sha256 of the chart archive): a chart without one cannot be verified", name, e.Version, e.Digest)
	}
	if len(e.URLs) == 0 || e.URLs[0] == "" {
		return fmt.Sprintf("chart %s %s has no URL", name, e.Version)
	}
	return ""
}

// Fetch implements [Source].
func (s *helmRepo) Fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List) {
	var l diag.List
	ref, ok := v.Ref.(*helmRef)
	if !ok {
		l.Errorf(v.Location, 0, 0, "", "chart %s was not listed by the Helm repository %s", v.ID(), s.shown)
		return nil, l
	}
	if ref.cached != "" {
		return fetchCachedChart(v, ref, s.opts, s.origin, s.shown)
	}
	data, err := s.archive(ctx, v.Name, v.Version.String(), ref)
	if err != nil {
		l.Errorf(v.Location, 0, 0, "", "%v", err)
		return nil, l
	}
	fsys, err := chartPackage(v, data)
	if err != nil {
		l.Errorf(v.Location, 0, 0, "", "chart %s %s from %s: %v", v.Name, v.Version, s.shown, err)
		return nil, l
	}
	pkg, pl := plugin.Load(fsys, s.origin, v.Location)
	cacheChartPackage(s.opts, pkg, fsys)
	return pkg, append(l, pl...)
}

// pinnedCharts lists the locked chart versions in the cache (pinnedChartVersions).
func (s *helmRepo) pinnedCharts() []*Version { return pinnedChartVersions(s.opts, s.origin) }

// cacheChartPackage keeps the package made of a chart version in the cache
// under its package digest (the digest a lock file pins), as a package archive,
// so that it can be listed from the cache when its source is down. A cache that
// cannot be written only costs that.
func cacheChartPackage(opts HTTPOptions, pkg *plugin.Package, fsys fs.FS) {
	if pkg == nil || !digestRE.MatchString(pkg.Digest) || opts.Cache == nil {
		return
	}
	var buf bytes.Buffer
	if err := archive.Write(&buf, fsys); err == nil {
		_ = opts.Cache.Put(pkg.Digest, buf.Bytes())
	}
}

// pinnedChartVersions lists the chart versions a lock file pins (opts.Pinned,
// package digests) whose packages are in the cache (cacheChartPackage) and
// still have that digest, as their plugin.yaml describes them. None with a
// keyring or signature keys: a provenance file or signature is checked on
// every use.
func pinnedChartVersions(opts HTTPOptions, origin plugin.Origin) []*Version {
	if opts.Keyring != "" || len(opts.SignatureKeys) > 0 {
		return nil
	}
	var out []*Version
	for _, d := range opts.Pinned {
		fsys, err := cachedPackage(opts, d)
		if err != nil {
			continue
		}
		loc := "cache/" + d
		m, ml := plugin.ReadManifest(fsys, loc)
		if m == nil || ml.HasFatal() {
			continue
		}
		if k := m.Plugin.Spec.Contributes.Kubernetes; k == nil || len(k.HelmReleases) != 1 || k.HelmReleases[0].Chart != HelmChartFile {
			continue // not a chart's package: another source's plugin
		}
		v := versionOf(m.Plugin, origin, loc)
		v.Digest, v.Ref = d, &helmRef{cached: d}
		out = append(out, v)
	}
	return out
}

// cachedPackage is the package archive cached under the package digest d,
// unpacked and checked to have that digest.
func cachedPackage(opts HTTPOptions, d string) (fs.FS, error) {
	data, err := opts.Cache.Get(d)
	if err != nil {
		return nil, err
	}
	fsys, err := archive.Extract(bytes.NewReader(data), archive.Limits{})
	if err != nil {
		return nil, err
	}
	if got, err := plugin.Digest(fsys); err != nil || got != d {
		return nil, fmt.Errorf("the cached package has digest %s, not %s", got, d)
	}
	return fsys, nil
}

// fetchCachedChart loads the package of a chart version listed from the cache
// alone (pinnedChartVersions); shown names the source in errors.
func fetchCachedChart(v *Version, ref *helmRef, opts HTTPOptions, origin plugin.Origin, shown string) (*plugin.Package, diag.List) {
	var l diag.List
	fsys, err := cachedPackage(opts, ref.cached)
	if err != nil {
		l.Errorf(v.Location, 0, 0, "", "chart %s %s from %s, listed from the cache: %v", v.Name, v.Version, shown, err)
		return nil, l
	}
	pkg, pl := plugin.Load(fsys, origin, v.Location)
	return pkg, append(l, pl...)
}

// archive returns the archive of chart name at version, listed at ref: from the
// cache when it holds the index's digest, else downloaded (bounded as a package
// file) and refused unless its sha256 is the index's digest; with a keyring, its
// provenance file (downloaded every time) checked under the source's policy.
func (s *helmRepo) archive(ctx context.Context, name, version string, ref *helmRef) ([]byte, error) {
	data, err := s.download(ctx, name, version, ref)
	if err != nil {
		return nil, err
	}
	if s.opts.Keyring != "" {
		// Helm's convention: the provenance file is the archive's URL with .prov.
		prov, err := s.get(ctx, ref.url.String()+".prov", maxProvenance)
		if err != nil && !strings.Contains(err.Error(), "404") {
			return nil, fmt.Errorf("cannot download the provenance file of chart %s %s from %s: %w", name, version, s.shown, err)
		}
		what := fmt.Sprintf("chart %s %s from %s", name, version, s.shown)
		if err := verifyProvenance(what, data, prov, path.Base(ref.url.Path), s.opts); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// download returns the archive, from the cache or the repository, with the
// index's digest.
func (s *helmRepo) download(ctx context.Context, name, version string, ref *helmRef) ([]byte, error) {
	key := "sha256:" + ref.digest
	if data, err := s.opts.Cache.Get(key); err == nil && sha256Hex(data) == ref.digest {
		return data, nil
	}
	s.opts.Cache.Remove(key)
	// The archive becomes one file of the package: bounded as a package file is.
	data, err := s.get(ctx, ref.url.String(), plugin.MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("cannot download chart %s %s from %s: %w", name, version, s.shown, err)
	}
	if got := sha256Hex(data); got != ref.digest {
		return nil, fmt.Errorf("chart %s %s from %s: the archive's sha256 is %s, but the index gives %s: refused", name, version, s.shown, got, ref.digest)
	}
	// A cache that cannot be written only costs a download next time.
	_ = s.opts.Cache.Put(key, data)
	return data, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// chartPackage makes the package of a chart version: its archive, checked to hold
// the chart the index announced, and a plugin.yaml that installs it.
func chartPackage(v *Version, data []byte) (fs.FS, error) {
	if err := checkChartArchive(data, v.Name, v.Version); err != nil {
		return nil, err
	}
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) }
	var m strings.Builder
	m.WriteString("apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\n")
	fmt.Fprintf(&m, "metadata: {name: %s, version: %s, description: %s}\n", q(v.Name), q(v.Version.String()), q(v.Description))
	m.WriteString("spec:\n")
	if v.KubernetesVersion != nil {
		fmt.Fprintf(&m, "  kubernetesVersion: %s\n", q(v.KubernetesVersion.String()))
	}
	m.WriteString("  contributes:\n    kubernetes:\n      helmReleases:\n")
	// The plugin's values are the chart's values, whole and typed.
	fmt.Fprintf(&m, "        - {chart: %s, namespace: %s, values: {fromValue: \"\"}}\n", HelmChartFile, q(v.Name))
	return fstest.MapFS{
		plugin.ManifestFile: {Data: []byte(m.String()), Mode: 0o644},
		HelmChartFile:       {Data: data, Mode: 0o644},
	}, nil
}

// checkChartArchive unpacks a chart archive with the package archive checks (no
// absolute or '..' paths, bounded size and entries) and checks that it holds
// chart name at version.
func checkChartArchive(data []byte, name string, version *semver.Version) error {
	files, err := archive.Extract(bytes.NewReader(data), archive.Limits{})
	if err != nil {
		return fmt.Errorf("cannot unpack the chart archive: %w", err)
	}
	b, err := fs.ReadFile(files, path.Join(name, "Chart.yaml"))
	if err != nil {
		return fmt.Errorf("the chart archive has no %s/Chart.yaml", name)
	}
	var meta struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("the archive's Chart.yaml: %w", err)
	}
	if got, err := semver.StrictNewVersion(meta.Version); meta.Name != name || err != nil || !got.Equal(version) {
		return fmt.Errorf("the archive holds chart %s %s, not %s %s", meta.Name, meta.Version, name, version)
	}
	return nil
}
