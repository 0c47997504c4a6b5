package source

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// MaxOCICharts bounds the chart repositories an OCI type: helm source lists
// (one tags listing each).
const MaxOCICharts = 1000

// helmOCIRepo is the Helm charts in an OCI registry as a catalog: each tag that
// is a version (Helm's '_' for '+') of a chart repository is a plugin version,
// whose package installs the chart as a Helm repository's does.
type helmOCIRepo struct {
	origin plugin.Origin
	prefix string
	shown  string
	opts   HTTPOptions
}

// ociChartRef is a listed OCI chart version's handle.
type ociChartRef struct {
	repository string // oci://HOST/REPO/CHART
	tag        string
}

// HelmOCIRepository returns the Helm charts under oci://HOST/PREFIX (as `helm
// push` stores them) as a source: either PREFIX is itself one chart's
// repository (its last element the chart's name), or the charts are the
// repositories PREFIX/NAME, as the registry's catalog API lists them (at most
// MaxOCICharts). Every tag that is a semantic version is a plugin version of the
// chart's name; other tags (latest, cosign's sha256-….sig) are not versions.
// Listing reads tags only, so no kubernetesVersion is listed: Helm checks the
// chart's kubeVersion when it renders. Fetch pulls the chart (bounded, its
// layer's digest checked), checks its cosign signature under opts'
// SignatureKeys, and makes the package a Helm repository's chart makes.
func HelmOCIRepository(origin plugin.Origin, prefix string, opts HTTPOptions) Source {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultHTTPTimeout
	}
	return &helmOCIRepo{origin: origin, prefix: strings.TrimSuffix(prefix, "/"), shown: redact.URL(prefix), opts: opts}
}

// String names the source in logs.
func (s *helmOCIRepo) String() string { return s.origin.Name + " helm " + s.shown }

// List implements [Source].
func (s *helmOCIRepo) List(ctx context.Context) ([]*Version, diag.List) {
	var l diag.List
	if err := CheckCatalogURL(s.prefix); err != nil {
		l.Errorf(s.shown, 0, 0, "", "%v", err)
		return nil, l
	}
	r, err := oci.ParseRef(s.prefix)
	if err == nil && r.Reference != "" {
		err = fmt.Errorf("name the charts' prefix or a chart's repository, without a tag or digest")
	}
	if err != nil {
		l.Errorf(s.shown, 0, 0, "", "%v", err)
		return nil, l
	}
	c, err := ociClientFor(s.prefix, s.opts)
	if err != nil {
		l.Errorf(s.shown, 0, 0, "", "%v", err)
		return nil, l
	}
	// One chart's repository?
	tags, tagErr := c.Tags(ctx, s.prefix)
	if tagErr == nil && slices.ContainsFunc(tags, func(t string) bool { return tagVersion(t) != nil }) {
		return s.versions(path.Base(r.Repository), s.prefix, tags, &l), l
	}
	names, err := c.Repositories(ctx, s.prefix)
	if err != nil || len(names) == 0 {
		return s.unlisted(ctx, tagErr, err, &l), l
	}
	slices.Sort(names)
	if len(names) > MaxOCICharts {
		l.Errorf(s.shown, 0, 0, "", "%d chart repositories under %s, more than the %d listed; the first %d are", len(names), s.shown, MaxOCICharts, MaxOCICharts)
		names = names[:MaxOCICharts]
	}
	var out []*Version
	for _, name := range names {
		repo := s.prefix + "/" + name
		tags, err := c.Tags(ctx, repo)
		if err != nil {
			l.Errorf(s.shown, 0, 0, "", "chart %s: listing its versions: %v", name, err)
			continue
		}
		out = append(out, s.versions(name, repo, tags, &l)...)
	}
	return out, l
}

// unlisted is what List gives when the prefix is no chart's repository and
// the registry lists no repository under it (listErr, or none): the locked
// versions from the cache, with a warning, else an error saying why each way
// of listing failed.
func (s *helmOCIRepo) unlisted(ctx context.Context, tagErr, listErr error, l *diag.List) []*Version {
	if vs := s.pinned(); len(vs) > 0 && ctx.Err() == nil {
		l.Warnf(s.shown, 0, 0, "", "cannot list the charts (%v); listing the %d locked chart version(s) found in the cache", firstErr(tagErr, listErr), len(vs))
		return vs
	}
	why := "the registry lists no repository under it"
	if listErr != nil {
		why = fmt.Sprintf("the registry does not list the repositories under it (its catalog API: %v)", listErr)
	}
	tagWhy := "it has no version tag"
	if tagErr != nil {
		tagWhy = fmt.Sprintf("listing its tags: %v", tagErr)
	}
	l.Errorf(s.shown, 0, 0, "", "cannot list Helm charts: %s is not a chart's repository (%s), and %s; name a chart's repository (oci://HOST/REPO/CHART) instead", s.shown, tagWhy, why)
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// tagVersion is the version a tag stands for (Helm writes '+' as '_'); nil
// when it is none.
func tagVersion(tag string) *semver.Version {
	v, err := semver.StrictNewVersion(strings.ReplaceAll(tag, "_", "+"))
	if err != nil {
		return nil
	}
	return v
}

// versions makes the plugin versions of chart name's tags in repo.
func (s *helmOCIRepo) versions(name, repo string, tags []string, l *diag.List) []*Version {
	if !plugin.NameRE.MatchString(name) || len(name) > 63 {
		l.Errorf(s.shown, 0, 0, "", "chart name %q (%s) is not a plugin name (a DNS label)", name, repo)
		return nil
	}
	var out []*Version
	seen := map[string]bool{}
	for _, t := range tags {
		v := tagVersion(t)
		if v == nil || seen[v.String()] {
			continue
		}
		seen[v.String()] = true
		out = append(out, &Version{Name: name, Version: v, Origin: s.origin, Location: redact.URL(repo) + ":" + t,
			Ref: &ociChartRef{repository: repo, tag: t}})
	}
	slices.SortFunc(out, func(a, b *Version) int { return b.Version.Compare(a.Version) })
	return out
}

// pinned lists the locked chart versions in the cache, as a Helm repository does.
func (s *helmOCIRepo) pinned() []*Version {
	return pinnedChartVersions(s.opts, s.origin)
}

// Fetch implements [Source].
func (s *helmOCIRepo) Fetch(ctx context.Context, v *Version) (*plugin.Package, diag.List) {
	var l diag.List
	if ref, ok := v.Ref.(*helmRef); ok && ref.cached != "" {
		return fetchCachedChart(v, ref, s.opts, s.origin, s.shown)
	}
	ref, ok := v.Ref.(*ociChartRef)
	if !ok {
		l.Errorf(v.Location, 0, 0, "", "chart %s was not listed by the OCI registry %s", v.ID(), s.shown)
		return nil, l
	}
	what := fmt.Sprintf("chart %s %s from %s", v.Name, v.Version, redact.URL(ref.repository))
	c, err := ociClientFor(ref.repository, s.opts)
	if err != nil {
		l.Errorf(v.Location, 0, 0, "", "%s: %v", what, err)
		return nil, l
	}
	pulled, err := c.PullChart(ctx, ref.repository+":"+ref.tag, plugin.MaxFileSize)
	if err != nil {
		l.Errorf(v.Location, 0, 0, "", "%s: %v", what, err)
		return nil, l
	}
	if err := verifyCosign(ctx, c, what, ref.repository, pulled.Manifest, s.opts); err != nil {
		l.Errorf(v.Location, 0, 0, "", "%v", err)
		return nil, l
	}
	_ = s.opts.Cache.Put(pulled.Digest, pulled.Archive)
	fsys, err := chartPackage(v, pulled.Archive)
	if err != nil {
		l.Errorf(v.Location, 0, 0, "", "%s: %v", what, err)
		return nil, l
	}
	pkg, pl := plugin.Load(fsys, s.origin, v.Location)
	cacheChartPackage(s.opts, pkg, fsys)
	return pkg, append(l, pl...)
}
