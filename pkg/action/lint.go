package action

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/proc"
	"github.com/kubeplug/kubeplug/pkg/action/internal/kubeschema"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/source"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// Lint checks plugin packages.
type Lint struct {
	cfg *Config
	// Live validates the rendered objects against the OpenAPI v3 schemas of
	// the cluster Target names (which cover its CRDs) instead of the built-in
	// schemas. Without it, and without an explicit Target, lint never
	// contacts a cluster.
	Live bool
	// Target is the cluster Live checks against; an explicit one (a
	// kubeconfig, a context, a server) implies Live.
	Target KubeconfigTarget

	liveSrc kubeschema.Source
	liveErr error // the first error asking the cluster; reported once
}

// NewLint returns a Lint action.
func NewLint(cfg *Config) *Lint { return &Lint{cfg: cfg} }

// Run checks each path: a package directory (it holds plugin.yaml), a tree of
// packages, or a package archive (a file, see [Package]). It returns how many packages it checked and every problem found in all of them.
func (a *Lint) Run(ctx context.Context, dirs ...string) (int, diag.List) {
	var l diag.List
	n := 0
	a.liveSrc, a.liveErr = nil, nil
	if a.Live || a.Target.Explicit() {
		cfg, err := a.Target.Config()
		if err == nil {
			a.liveSrc, err = kubeschema.Live(ctx, cfg)
		}
		if err != nil {
			l.Errorf("", 0, 0, "", "cannot validate against the cluster: %v", err)
			return 0, l
		}
	}
	for _, dir := range dirs {
		if err := ctx.Err(); err != nil {
			l.Errorf(dir, 0, 0, "", "%v", err)
			break
		}
		k, dl := a.lintPath(ctx, dir)
		n += k
		l = append(l, dl...)
	}
	if a.liveErr != nil {
		l.Errorf("", 0, 0, "", "cannot validate against the cluster: %v", a.liveErr)
	}
	l.Sort()
	return n, l
}

// lintPath checks one path of Run: a package archive, a package directory or
// a tree of packages. It returns how many packages it checked and their
// problems.
func (a *Lint) lintPath(ctx context.Context, dir string) (int, diag.List) {
	var l diag.List
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		l.Errorf(dir, 0, 0, "", "cannot read the plugin directory: %v", unwrapPathErr(err))
		return 0, l
	case fi.Mode().IsRegular():
		// An archive: unpacked with its checks, then checked whole.
		n, _, l := a.lintSource(ctx, source.Archive(plugin.OriginUser, dir), false)
		return n, l
	case !fi.IsDir():
		l.Errorf(dir, 0, 0, "", "expected a plugin directory (holding %s) or a package archive, found a %s", plugin.ManifestFile, fi.Mode().Type())
		return 0, l
	}
	if _, err := os.Stat(filepath.Join(dir, plugin.ManifestFile)); err == nil {
		a.cfg.logger().Debug("linting plugin", "dir", dir)
		pkg, pl := plugin.Load(os.DirFS(dir), plugin.OriginUser, filepath.Clean(dir))
		l = append(l, pl...)
		lintDigests(pkg, &l)
		l = append(l, lintValueRefs(pkg)...)
		l = append(l, lintTemplates(pkg)...)
		if pkg != nil && !pl.HasFatal() {
			l = append(l, a.renderDefaults(ctx, dir, pkg)...)
		}
		return 1, l
	}
	// A tree: every package in it, whole; duplicates are no lint problem.
	n, listed, tl := a.lintSource(ctx, source.Dir(plugin.OriginUser, dir), true)
	if listed == 0 && len(tl) == 0 {
		tl.Errorf(dir, 0, 0, "", "no %s found in this directory or below it", plugin.ManifestFile)
	}
	return n, tl
}

// lintSource checks every package src lists; with renderDirs, those that are
// directories are rendered with their default values too. It returns how
// many packages it checked, how many src listed, and their problems.
func (a *Lint) lintSource(ctx context.Context, src source.Source, renderDirs bool) (checked, listed int, l diag.List) {
	vs, l := src.List(ctx)
	for _, v := range vs {
		pkg, pl := src.Fetch(ctx, v)
		l = append(l, pl...)
		lintDigests(pkg, &l)
		if pkg == nil {
			continue
		}
		l = append(l, lintValueRefs(pkg)...)
		l = append(l, lintTemplates(pkg)...)
		checked++
		if fi, err := os.Stat(pkg.Location); renderDirs && err == nil && fi.IsDir() && !pl.HasFatal() {
			l = append(l, a.renderDefaults(ctx, pkg.Location, pkg)...)
		}
	}
	return checked, len(vs), l
}

// lintKubernetesVersion is the Kubernetes version lint renders a plugin for:
// the one kubeplug's local provider runs.
const lintKubernetesVersion = "1.37.1"

// lintProviders are the sample clusters' spec.provider by provider name: lint
// renders a plugin for the first provider its spec.providers names (an
// AWS-only plugin reads .Cluster.Spec.Provider.AWS), else for the local one.
var lintProviders = map[string]string{
	"local": "{local: {}}",
	"aws":   "{aws: {imageID: ami-0123456789abcdef0}}",
}

// lintProvider is the sample cluster's spec.provider for pkg.
func lintProvider(pkg *plugin.Package) string {
	for _, p := range pkg.Manifest.Spec.Providers {
		if s, ok := lintProviders[p]; ok {
			return s
		}
	}
	return lintProviders[v1alpha1.DefaultProvider]
}

// renderDefaults renders a declarative plugin (one without code: lint runs
// none) in dir with its default values, in a
// cluster of one worker pool that enables it alone (with the built-in plugins
// available for its requirements), as kubeplug render would: a template or
// chart that fails there is a lint error naming its file and line. A plugin
// that cannot be rendered alone (a requirement no source here has, values
// without defaults) is a warning saying so, not an error of the package.
func (a *Lint) renderDefaults(ctx context.Context, dir string, pkg *plugin.Package) diag.List {
	if pkg.Manifest.Spec.Runtime != nil {
		// Rendering would run the plugin's own code: lint does not run code.
		return nil
	}
	name := pkg.Manifest.Metadata.Name
	sample := lintSample(dir, pkg)
	if sample == nil {
		return nil
	}
	// The manifests are rendered again, from the request the plugin got, to
	// check their objects at the lines that wrote them.
	cfg := *a.cfg
	rec := &requestRecorder{next: a.cfg.InProcess[name]}
	cfg.InProcess = maps.Clone(a.cfg.InProcess)
	if cfg.InProcess == nil {
		cfg.InProcess = map[string]stage.Runtime{}
	}
	cfg.InProcess[name] = rec
	files, rl := NewRender(&cfg).Files(ctx, sample.cluster)
	out := sample.problems(pkg, rl)
	if !rl.HasFatal() {
		out = append(out, a.lintObjects(ctx, pkg, sample.rel, rec.request(), files)...)
	}
	return out
}

// lintSampleCluster is the cluster renderDefaults renders a package in: its
// cluster file (synthetic, never written), and the package's directory,
// absolute and relative to the working directory.
type lintSampleCluster struct {
	cluster   *config.Cluster
	synthetic string
	abs, rel  string
}

// lintSample is the cluster of one worker pool that enables pkg, in dir,
// alone; nil when it cannot be made.
func lintSample(dir string, pkg *plugin.Package) *lintSampleCluster {
	cwd, err := os.Getwd()
	if err != nil {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	rel, err := filepath.Rel(cwd, abs)
	if err != nil {
		rel = abs
	}
	doc := "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: lint}\nspec:\n  kubernetesVersion: " + lintKubernetesVersion +
		"\n  provider: " + lintProvider(pkg) +
		"\n  nodePools: [{name: workers, count: 1}]\n  plugins:\n    sources: [{dir: " + strconv.Quote(filepath.ToSlash(rel)) +
		"}]\n    enabled: [{name: " + strconv.Quote(pkg.Manifest.Metadata.Name) + ", version: " + strconv.Quote(pkg.Manifest.Metadata.Version) + "}]\n"
	synthetic := filepath.Join(cwd, ".kubeplug-lint.yaml") // never written
	cl, cl0 := config.Parse(synthetic, []byte(doc))
	if cl == nil || cl0.HasFatal() {
		return nil
	}
	return &lintSampleCluster{cluster: cl, synthetic: synthetic, abs: abs, rel: rel}
}

// problems are the package pkg's own problems among the diagnostics rl of
// rendering the sample: errors and warnings at its files, errors of it that
// name no file (at its manifest); when it has none, the errors elsewhere (a
// requirement no source here has, values without defaults) are one warning
// saying it was not rendered with its default values.
func (s *lintSampleCluster) problems(pkg *plugin.Package, rl diag.List) diag.List {
	name := pkg.Manifest.Metadata.Name
	var out diag.List
	var elsewhere []string
	for _, d := range rl {
		if d.Plugin == name {
			d = sampleFlagValue(pkg, d)
		}
		if d.Severity != diag.Fatal {
			// A warning at a file of the package (a deprecated API) is the
			// package's; the rest are the sample cluster's.
			if f, ok := within(d.File, s.abs, s.rel); ok && d.Severity == diag.Warning {
				d.File = f
				out = append(out, d)
			}
			continue
		}
		if f, ok := within(d.File, s.abs, s.rel); ok {
			d.File = f
			out = append(out, d)
			continue
		}
		if d.File == "" && d.Plugin == name {
			// A chart's error names its template in the message.
			d.File = filepath.Join(s.rel, plugin.ManifestFile)
			out = append(out, d)
			continue
		}
		if d.File == s.synthetic {
			elsewhere = append(elsewhere, d.Message)
		} else {
			elsewhere = append(elsewhere, d.String())
		}
	}
	if len(out) == 0 && len(elsewhere) > 0 {
		out.Warnf(filepath.Join(s.rel, plugin.ManifestFile), 0, 0, "", "not rendered with its default values: %s", strings.Join(elsewhere, "; "))
	}
	return out
}

// within says whether file (absolute or relative to the working directory) is in
// the package at abs, and names it the way the user named the package (rel).
func within(file, abs, rel string) (string, bool) {
	if file == "" {
		return "", false
	}
	f, err := filepath.Abs(file)
	if err != nil {
		return "", false
	}
	r, err := filepath.Rel(abs, f)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.Join(rel, r), true
}

// lintDigests checks every executable pin of pkg (spec.runtime.sha256, an exec
// check's sha256) against the file the package holds, as the runtimes will
// before they run it: a pin that cannot match is a lint error, not a surprise
// at the first run.
func lintDigests(pkg *plugin.Package, l *diag.List) {
	if pkg == nil || pkg.Manifest == nil {
		return
	}
	check := func(ptr, ref, pin string) {
		if pin == "" || ref == "" {
			return
		}
		name, err := plugin.CleanRef(ref)
		if err != nil {
			return // reported by Load
		}
		if _, err := proc.Verified(pkg.FS, name, pin); err != nil {
			file, line, col, field := pkg.ManifestPos(ptr)
			if de, ok := errors.AsType[*proc.DigestError](err); ok {
				l.Errorf(file, line, col, field, "sha256 %s does not match %s, whose sha256 is %s", de.Expected, ref, de.Actual)
				return
			}
			l.Errorf(file, line, col, field, "cannot check the sha256 of %s: %v", ref, err)
		}
	}
	s := pkg.Manifest.Spec
	if r := s.Runtime; r != nil && len(r.Command) > 0 {
		check("/spec/runtime/sha256", r.Command[0], r.SHA256)
	}
	for i, c := range s.Validate {
		if c.Exec != nil && len(c.Exec.Command) > 0 {
			check("/spec/validate/"+strconv.Itoa(i)+"/exec/sha256", c.Exec.Command[0], c.Exec.SHA256)
		}
	}
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok { //nolint:errorlint // os.Stat returns *PathError unwrapped
		return pe.Err
	}
	return err
}
