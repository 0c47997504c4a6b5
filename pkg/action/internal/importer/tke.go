package importer

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// tkeHooks are the installer hooks of a TKEStack expansion (hooks/NAME), in the
// order tke-installer runs them, and the node hook entry point each becomes.
var tkeHooks = []struct{ name, at, when string }{
	{"pre-install", v1alpha1.HookBeforeNodeup, "before the cluster is installed"},
	{"post-cluster-ready", v1alpha1.HookAfterNodeup, "once the cluster is ready"},
	{"post-install", v1alpha1.HookAfterDeploy, "after everything is installed"},
}

// FromTKE imports a TKEStack installer expansion directory (hooks/, charts/,
// and the layout tke-installer reserves: applications/, files/, provider/,
// images.tar.gz, values.yaml) as one plugin: each installer hook becomes a node
// hook on the control-plane machines at the matching entry point, each chart in
// charts/ a Helm release.
//
// Branches: a translation that follows docs/import.md's mapping table for this
// format row by row: one guarded step per source field, each refusing or listing
// what kubeplug cannot carry with its own message, so the code and the table can
// be read side by side.
func FromTKE(input string, o Options) (*Result, error) {
	fi, err := os.Stat(input)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", input, unwrapPath(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: %w: a TKEStack expansion is a directory (hooks/, charts/, ...)", input, ErrFormat)
	}
	tree, err := readTree(input)
	if err != nil {
		return nil, err
	}
	hooks := subtree(tree, "hooks")
	if len(hooks) == 0 && !hasPrefix(tree, "charts/") {
		return nil, fmt.Errorf("%s: %w: no hooks/ and no charts/; expected a TKEStack expansion directory", input, ErrFormat)
	}
	var r Report
	r.Source = fmt.Sprintf("the TKEStack expansion `%s`", base(input))
	abs, _ := filepath.Abs(input)
	name, err := Name(&r, "the expansion directory's name", filepath.Base(abs), 63)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", input, err)
	}
	p := newPackage(name, name, "0.1.0", "Imported from the TKEStack expansion "+filepath.Base(abs))
	r.Note("An expansion has no version of its own: the plugin starts at 0.1.0.")
	used := map[string]bool{}
	for _, h := range tkeHooks {
		script, ok := hooks[h.name]
		if !ok {
			continue
		}
		used["hooks/"+h.name] = true
		rel := "scripts/" + h.name + ".sh"
		p.Files[rel] = script
		p.Files["original/hooks/"+h.name] = script
		n := p.node("control-plane")
		n.Hooks = append(n.Hooks, v1alpha1.NodeHook{Name: h.name, At: h.at, Run: v1alpha1.HookRun{Script: rel}, Behavior: v1alpha1.BehaviorSyncEnforce})
		r.Map("hooks/"+h.name, fmt.Sprintf("node hook `%s` at `%s` on the control-plane machines, running `%s`", h.name, h.at, rel))
		r.Original = append(r.Original, "`original/hooks/"+h.name+"`: the installer hook")
	}
	if slices.ContainsFunc(tkeHooks, func(h struct{ name, at, when string }) bool { return used["hooks/"+h.name] }) {
		r.Note("tke-installer ran its hooks once, on the installer's host, with kubectl pointed at the new cluster. kubeplug runs node hooks on each control-plane machine at the entry point named: check that a script does not assume the installer's host, and that what it applies is idempotent.")
	}
	for _, f := range sortedKeys(hooks) {
		if !used["hooks/"+f] {
			r.Unmap("hooks/"+f, "not a hook tke-installer runs (pre-install, post-cluster-ready, post-install)")
		}
	}
	charts, err := tkeCharts(&r, tree)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", input, err)
	}
	ns := o.Namespace
	if ns == "" {
		ns = name
	}
	for _, c := range charts {
		release, err := Name(&r, "charts/"+c.file+" name", c.meta.Name, 53)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", input, err)
		}
		dir := "charts/" + release
		for f, data := range c.files {
			p.Files[dir+"/"+f] = data
		}
		kube := p.kubernetes()
		kube.HelmReleases = append(kube.HelmReleases, v1alpha1.HelmRelease{Name: release, Chart: dir, Namespace: ns})
		r.Map("charts/"+c.file, fmt.Sprintf("Helm release `%s` of chart `%s` (%s %s) in namespace `%s`", release, dir, c.meta.Name, c.meta.Version, ns))
	}
	reserved := map[string]string{
		"applications/":        "tke-installer reserves it for application YAML but does not read it yet",
		"files/":               "tke-installer reserves it for files to copy but does not read it yet",
		"provider/":            "tke-installer reserves it for provider overrides but does not read it yet",
		"images.tar.gz":        "images for tke-installer's registry; load them into a registry the cluster pulls from (see docs/distribution.md)",
		"values.yaml":          "tke-installer reserves it for chart values but defines no format yet; kept in original/, the releases take their charts' defaults",
		"custom.charts.tar.gz": "a tarball of charts for tke-installer's chart repository; unpack it into charts/ and import again",
	}
	for _, f := range sortedKeys(tree) {
		if strings.HasPrefix(f, "hooks/") || strings.HasPrefix(f, "charts/") {
			continue
		}
		top := f
		if i := strings.IndexByte(f, '/'); i >= 0 {
			top = f[:i+1]
		}
		if used[top] {
			continue
		}
		used[top] = true
		why, ok := reserved[top]
		if !ok {
			why = "not part of a TKEStack expansion's layout"
		}
		if top == "values.yaml" {
			p.Files["original/values.yaml"] = tree[f]
			r.Original = append(r.Original, "`original/values.yaml`: the expansion's values")
		}
		r.Unmap(top, "%s", why)
	}
	p.Report = r
	return &Result{Packages: []*Package{p}}, nil
}

// tkeChart is one chart of an expansion's charts/ directory.
type tkeChart struct {
	file  string
	meta  chartMeta
	files map[string][]byte
}

// tkeCharts reads the charts of charts/: unpacked directories and .tgz archives.
func tkeCharts(r *Report, tree map[string][]byte) ([]tkeChart, error) {
	var out []tkeChart
	seen := map[string]bool{}
	for _, f := range sortedKeys(tree) {
		rest, ok := strings.CutPrefix(f, "charts/")
		if !ok {
			continue
		}
		top, _, isDir := strings.Cut(rest, "/")
		if seen[top] {
			continue
		}
		seen[top] = true
		var files map[string][]byte
		switch {
		case isDir:
			files = subtree(tree, "charts/"+top)
		case strings.HasSuffix(top, ".tgz") || strings.HasSuffix(top, ".tar.gz"):
			var err error
			if files, err = unpack(tree[f]); err != nil {
				return nil, fmt.Errorf("charts/%s: %w", top, err)
			}
			root, err := chartRoot("charts/"+top, files)
			if err != nil {
				return nil, err
			}
			files = subtree(files, root)
		default:
			r.Unmap("charts/"+top, "neither a chart directory nor a packaged chart (.tgz)")
			continue
		}
		m, _, err := readChart(path.Join("charts", top, "Chart.yaml"), files)
		if err != nil {
			return nil, err
		}
		out = append(out, tkeChart{file: top, meta: m, files: files})
	}
	return out, nil
}

// hasPrefix says whether any path of tree starts with prefix.
func hasPrefix(tree map[string][]byte, prefix string) bool {
	for p := range tree {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}
