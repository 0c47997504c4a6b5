package action

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// PluginTest runs one plugin package through initialise and render against a
// sample cluster, as `kubeplug render` would for a cluster enabling it: one worker
// pool, the Kubernetes version of the local provider, the plugin's default values,
// and the built-in plugins for its requirements. Unlike lint it runs the plugin's
// own code (a plugin with a runtime is started).
type PluginTest struct {
	cfg *Config
	// OutputDir, when set, receives the rendered files (as `render --output-dir`).
	OutputDir string
	// Cluster also installs the plugin into a throwaway local cluster (simulated
	// nodes), runs its validate checks, uninstalls it and checks nothing of it is
	// left; the cluster is deleted at the end.
	Cluster bool
	// UpgradeFrom, with Cluster, is a package of an earlier version of the plugin:
	// it is installed first and the package under test installed over it, an
	// upgrade.
	UpgradeFrom string
	// Timeout bounds how long the plugin's objects may take to become ready in
	// the throwaway cluster. Default 5m.
	Timeout time.Duration
}

// NewPluginTest returns a PluginTest action.
func NewPluginTest(cfg *Config) *PluginTest { return &PluginTest{cfg: cfg} }

// PluginTestResult is what [PluginTest.Run] rendered.
type PluginTestResult struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
	// Files are the rendered files' paths, sorted.
	Files []string `json:"files"`
	// OutputDir is where they were written, when they were.
	OutputDir string `json:"outputDir,omitempty"`
	// Cluster is what the --cluster phase did, when it ran.
	Cluster *PluginTestCluster `json:"cluster,omitempty"`
}

// Run checks the package in dir (a directory or an archive) whole and renders the
// sample cluster; fatal diagnostics locate what failed (the plugin's file and line
// where the failure is the plugin's).
func (a *PluginTest) Run(ctx context.Context, dir string) (*PluginTestResult, diag.List) {
	pkg, l := fetchOne(ctx, dir)
	if pkg == nil {
		return nil, l
	}
	name, version := pkg.Manifest.Metadata.Name, pkg.Manifest.Metadata.Version
	cl, abs, rel := testSample(dir, name, version, &l)
	if cl == nil {
		return nil, l
	}
	files, rl := NewRender(a.cfg).Files(ctx, cl)
	for i := range rl {
		if f, ok := within(rl[i].File, abs, rel); ok {
			rl[i].File = f
		}
	}
	l = append(l, rl...)
	if rl.HasFatal() {
		return nil, l
	}
	res := &PluginTestResult{Name: name, Version: version, Digest: pkg.Digest}
	for f := range files {
		res.Files = append(res.Files, f)
	}
	slices.Sort(res.Files)
	if a.OutputDir != "" {
		if wl := render.WriteFiles(ctx, a.OutputDir, files); wl.HasFatal() {
			return nil, append(l, wl...)
		}
		res.OutputDir = a.OutputDir
	}
	if a.Cluster {
		c, cl := a.runCluster(ctx, dir, pkg)
		if l = append(l, cl...); c == nil {
			return nil, l
		}
		res.Cluster = c
	} else if a.UpgradeFrom != "" {
		l.Errorf(a.UpgradeFrom, 0, 0, "", "--upgrade-from needs --cluster: the upgrade is installed into a throwaway cluster")
		return nil, l
	}
	return res, l
}

// fetchOne fetches the one plugin package in dir (a directory or an
// archive), checked whole; nil when there is none, several, or it has fatal
// problems.
func fetchOne(ctx context.Context, dir string) (*plugin.Package, diag.List) {
	var l diag.List
	if err := ctx.Err(); err != nil {
		l.Errorf(dir, 0, 0, "", "%v", err)
		return nil, l
	}
	if _, err := os.Stat(dir); err != nil {
		l.Errorf(dir, 0, 0, "", "expected a plugin package directory (holding %s) or archive", plugin.ManifestFile)
		return nil, l
	}
	src := source.Path(plugin.OriginUser, dir)
	vs, vl := src.List(ctx)
	l = append(l, vl...)
	if vl.HasFatal() || len(vs) != 1 {
		if len(vs) > 1 {
			l.Errorf(dir, 0, 0, "", "expected one plugin package, found %d: test them one at a time", len(vs))
		}
		return nil, l
	}
	pkg, pl := src.Fetch(ctx, vs[0])
	l = append(l, pl...)
	if pkg == nil || pl.HasFatal() {
		return nil, l
	}
	return pkg, l
}

// testSample is the sample cluster of one worker pool that enables the
// package name at version in dir, and dir absolute and relative to the
// working directory; nil, with the errors in l, when it cannot be made. Its
// cluster file sits (never written) in the working directory and names the
// package relative to it, so that messages name the package's files as the
// user wrote dir.
func testSample(dir, name, version string, l *diag.List) (cl *config.Cluster, abs, rel string) {
	cwd, err := os.Getwd()
	if err != nil {
		l.Errorf(dir, 0, 0, "", "%v", err)
		return nil, "", ""
	}
	if abs, err = filepath.Abs(dir); err != nil {
		l.Errorf(dir, 0, 0, "", "%v", err)
		return nil, "", ""
	}
	if rel, err = filepath.Rel(cwd, abs); err != nil {
		rel = abs
	}
	doc := "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: plugin-test}\nspec:\n  kubernetesVersion: " + lintKubernetesVersion +
		"\n  nodePools: [{name: workers, count: 1}]\n  plugins:\n    sources: [{dir: " + strconv.Quote(filepath.ToSlash(rel)) +
		"}]\n    enabled: [{name: " + strconv.Quote(name) + ", version: " + strconv.Quote(version) + "}]\n"
	cl, cl0 := config.Parse(filepath.Join(cwd, ".kubeplug-plugin-test.yaml"), []byte(doc))
	if cl == nil || cl0.HasFatal() {
		*l = append(*l, cl0...)
		return nil, "", ""
	}
	return cl, abs, rel
}
