package source

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// ChartRef names a Helm chart by reference, as a release's chart may: an OCI
// chart (Chart is oci://REGISTRY/REPO/CHART) or a chart of a Helm repository
// (Repo is the repository's URL, Chart the chart's name), at a Version that may be
// a constraint.
type ChartRef struct {
	Repo, Chart, Version string
}

// Name is the chart's name: the last element of an OCI reference, or Chart.
func (r ChartRef) Name() string {
	if r.Repo != "" {
		return r.Chart
	}
	return r.Chart[strings.LastIndex(r.Chart, "/")+1:]
}

// Source is where the chart comes from: the repository URL or the OCI repository.
func (r ChartRef) Source() string {
	if r.Repo != "" {
		return r.Repo
	}
	return r.Chart
}

// String shows the reference: SOURCE CHART VERSION.
func (r ChartRef) String() string {
	return fmt.Sprintf("chart %s %s from %s", r.Name(), r.Version, r.Source())
}

// ChartPin is a chart version with its archive's digest ("sha256:HEX"), as
// kubeplug.lock pins it.
type ChartPin struct {
	Version string
	Digest  string
}

// Chart is a chart fetched by reference: its archive holds chart Name at Version,
// and Digest ("sha256:HEX") is the archive's sha256.
type Chart struct {
	Ref     ChartRef
	Name    string
	Version string
	Digest  string
	Archive []byte
	// Provenance is the chart's .prov, when its source serves one.
	Provenance []byte
	// Cached is true when the archive came from the cache without the network.
	Cached bool
}

// ChartFetcher fetches charts by reference into a digest-addressed cache.
type ChartFetcher struct {
	// Cache keeps archives by digest; nil caches nothing.
	Cache *Cache
	// Options returns the options (CA files, registry config, keyring,
	// timeout) for the source of ref, and the URL to read a Helm repository at:
	// ref.Repo with the credentials of the catalog source the options come from
	// (as a catalog URL carries them, user:password@), or "" for ref.Repo. Nil
	// gives the defaults.
	Options func(ref ChartRef) (opts HTTPOptions, repoURL string)
}

// Fetch resolves ref and returns its chart. The version is the pinned one when
// pin is set and ref's constraint admits it, else the highest version the
// source lists that the constraint admits. A pinned chart whose archive is in
// the cache is used from there, checked against the pinned digest, without the
// network. Every archive is checked: its sha256 against what the source
// announces (the index's digest, the OCI layer's), its paths and size (as a
// package archive), and its Chart.yaml's name and version. Errors name the
// chart, the version and the source. The caller compares the result's Digest
// with the pin: Fetch does not refuse a pinned version whose digest changed.
func (f *ChartFetcher) Fetch(ctx context.Context, ref ChartRef, pin *ChartPin) (*Chart, error) {
	c, err := semver.NewConstraint(ref.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a version or version constraint: %w", ref, ref.Version, err)
	}
	var pinned *semver.Version
	if pin != nil {
		if v, err := semver.StrictNewVersion(pin.Version); err == nil && c.Check(v) {
			pinned = v
		}
	}
	var opts HTTPOptions
	repoURL := ref.Repo
	if f.Options != nil {
		var u string
		if opts, u = f.Options(ref); u != "" {
			repoURL = u
		}
	}
	opts.Cache = f.Cache
	if ch := f.cached(ref, pin, pinned, opts); ch != nil {
		return ch, nil
	}
	var ch *Chart
	if ref.Repo != "" {
		ch, err = f.fromRepo(ctx, ref, repoURL, c, pinned, opts)
	} else {
		ch, err = f.fromOCI(ctx, ref, c, pinned, opts)
	}
	if err != nil {
		return nil, err
	}
	ver, _ := semver.StrictNewVersion(ch.Version)
	if err := checkChartArchive(ch.Archive, ch.Name, ver); err != nil {
		return nil, fmt.Errorf("chart %s %s from %s: %w", ch.Name, ch.Version, ref.Source(), err)
	}
	return ch, nil
}

// cached is the pinned version of ref from the cache, checked against the pin's
// digest and as a chart archive; nil when it is not there intact. With a
// keyring or signature keys the provenance file or signature is checked on
// every use: no shortcut.
func (f *ChartFetcher) cached(ref ChartRef, pin *ChartPin, pinned *semver.Version, opts HTTPOptions) *Chart {
	if pinned == nil || pin.Digest == "" || opts.Keyring != "" || len(opts.SignatureKeys) > 0 {
		return nil
	}
	data, err := f.Cache.Get(pin.Digest)
	if err != nil || "sha256:"+sha256Hex(data) != pin.Digest || checkChartArchive(data, ref.Name(), pinned) != nil {
		return nil
	}
	return &Chart{Ref: ref, Name: ref.Name(), Version: pinned.String(), Digest: pin.Digest, Archive: data, Cached: true}
}

// pick returns the version to take of those listed: the pinned one when it is
// listed, else the highest the constraint admits; nil when none.
func pick(vs []*semver.Version, c *semver.Constraints, pinned *semver.Version) *semver.Version {
	var best *semver.Version
	for _, v := range vs {
		if pinned != nil && v.Equal(pinned) {
			return v
		}
		if c.Check(v) && (best == nil || v.GreaterThan(best)) {
			best = v
		}
	}
	return best
}

// fromRepo resolves ref through its repository's index.yaml, as a type: helm
// source lists it, and downloads the archive.
func (f *ChartFetcher) fromRepo(ctx context.Context, ref ChartRef, repoURL string, c *semver.Constraints, pinned *semver.Version, opts HTTPOptions) (*Chart, error) {
	if err := plugin.CheckChartRepoURL(ref.Repo); err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	repo := HelmRepository(plugin.Origin{Name: "chart"}, repoURL, opts).(*helmRepo)
	listed, l := repo.List(ctx)
	byVersion := map[string]*Version{}
	var vs []*semver.Version
	for _, v := range listed {
		if v.Name == ref.Chart {
			byVersion[v.Version.String()] = v
			vs = append(vs, v.Version)
		}
	}
	if len(vs) == 0 {
		if l.HasFatal() && len(listed) == 0 {
			return nil, fmt.Errorf("%s: %s", ref, strings.TrimSpace(l.String()))
		}
		return nil, fmt.Errorf("%s: the repository's index lists no chart %s", ref, ref.Chart)
	}
	v := pick(vs, c, pinned)
	if v == nil {
		return nil, fmt.Errorf("%s: no version of chart %s in the repository's index meets %s (it lists %s)", ref, ref.Chart, ref.Version, versionList(vs))
	}
	hr := byVersion[v.String()].Ref.(*helmRef)
	data, err := repo.archive(ctx, ref.Chart, v.String(), hr)
	if err != nil {
		return nil, err
	}
	return &Chart{Ref: ref, Name: ref.Chart, Version: v.String(), Digest: "sha256:" + hr.digest, Archive: data}, nil
}

// fromOCI resolves ref through its repository's tags (none are listed when the
// version is exact) and pulls the chart.
func (f *ChartFetcher) fromOCI(ctx context.Context, ref ChartRef, c *semver.Constraints, pinned *semver.Version, opts HTTPOptions) (*Chart, error) {
	r, err := oci.ParseRef(ref.Chart)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if r.Reference != "" {
		return nil, fmt.Errorf("%s: name the chart without a tag or digest; its version is in version", ref)
	}
	client, err := oci.New(oci.Options{CAFiles: opts.CAFiles, RegistryConfig: opts.RegistryConfig, Timeout: opts.Timeout})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	v := pinned
	if v == nil {
		v, _ = semver.StrictNewVersion(strings.TrimPrefix(ref.Version, "="))
	}
	if v == nil {
		tags, err := client.Tags(ctx, ref.Chart)
		if err != nil {
			return nil, fmt.Errorf("%s: listing its versions: %w", ref, err)
		}
		var vs []*semver.Version
		for _, t := range tags {
			if tv, err := semver.StrictNewVersion(strings.ReplaceAll(t, "_", "+")); err == nil {
				vs = append(vs, tv)
			}
		}
		if v = pick(vs, c, nil); v == nil {
			return nil, fmt.Errorf("%s: no tag of %s is a version that meets %s (it has %s)", ref, ref.Chart, ref.Version, versionList(vs))
		}
	}
	pulled, err := client.PullChart(ctx, ref.Chart+":"+oci.ChartTag(v.String()), plugin.MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("chart %s %s from %s: %w", ref.Name(), v, ref.Chart, err)
	}
	what := fmt.Sprintf("chart %s %s from %s", ref.Name(), v, ref.Chart)
	if err := verifyProvenance(what, pulled.Archive, pulled.Provenance, ref.Name()+"-"+v.String()+".tgz", opts); err != nil {
		return nil, err
	}
	if err := verifyCosign(ctx, client, what, ref.Chart, pulled.Manifest, opts); err != nil {
		return nil, err
	}
	// A cache that cannot be written only costs a download next time.
	_ = f.Cache.Put(pulled.Digest, pulled.Archive)
	return &Chart{Ref: ref, Name: ref.Name(), Version: v.String(), Digest: pulled.Digest, Archive: pulled.Archive, Provenance: pulled.Provenance}, nil
}

// versionList shows versions for an error, at most 10 of the highest.
func versionList(vs []*semver.Version) string {
	if len(vs) == 0 {
		return "none"
	}
	sorted := slices.Clone(vs)
	slices.SortFunc(sorted, func(a, b *semver.Version) int { return b.Compare(a) })
	var out []string
	for i, v := range sorted {
		if i == 10 {
			out = append(out, fmt.Sprintf("and %d more", len(sorted)-10))
			break
		}
		out = append(out, v.String())
	}
	return strings.Join(out, ", ")
}
