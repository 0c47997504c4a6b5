package action

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/check"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// PluginTestCluster is what a --cluster test did on the throwaway cluster.
type PluginTestCluster struct {
	// UpgradedFrom is the version installed first, when the test upgraded.
	UpgradedFrom string `json:"upgradedFrom,omitempty"`
	// Checks are the validate checks of the last install or upgrade.
	Checks []check.Result `json:"checks,omitempty"`
	// Objects is how many objects the plugin had; all were gone after uninstall.
	Objects int `json:"objects"`
	// Duration is the whole cluster phase, the cluster's start and stop included.
	Duration time.Duration `json:"duration"`
}

// runCluster installs the package at dir (after the one at a.UpgradeFrom, when
// set) into a throwaway local cluster, with its validate checks, then uninstalls
// it and checks that none of its objects is left; the cluster is then deleted
// whatever happened. It touches no cluster but its own and no kubeconfig.
func (a *PluginTest) runCluster(ctx context.Context, dir string, pkg *plugin.Package) (*PluginTestCluster, diag.List) {
	var l diag.List
	start := time.Now()
	name, version := pkg.Manifest.Metadata.Name, pkg.Manifest.Metadata.Version
	tmp, err := os.MkdirTemp("", "kubeplug-plugin-test-")
	if err != nil {
		l.Errorf(dir, 0, 0, "", "%v", err)
		return nil, l
	}
	defer os.RemoveAll(tmp)
	res := &PluginTestCluster{}
	// The throwaway cluster's sources are the user's own paths — a directory or
	// an archive alike (source.Path) — so that its messages name them.
	paths := []string{dir}
	if a.UpgradeFrom != "" {
		prev, pl := loadOne(ctx, a.UpgradeFrom)
		if l = append(l, pl...); prev == nil {
			return nil, l
		}
		if prev.Manifest.Metadata.Name != name {
			l.Errorf(a.UpgradeFrom, 0, 0, "metadata.name", "--upgrade-from is plugin %s, not %s", prev.Manifest.Metadata.Name, name)
			return nil, l
		}
		res.UpgradedFrom = prev.Manifest.Metadata.Version
		if res.UpgradedFrom == version {
			l.Errorf(a.UpgradeFrom, 0, 0, "metadata.version", "--upgrade-from has the same version (%s) as the package under test", version)
			return nil, l
		}
		paths = append(paths, a.UpgradeFrom)
	}
	var sources strings.Builder
	abs := make([]string, len(paths))
	for i, p := range paths {
		if abs[i], err = filepath.Abs(p); err != nil {
			l.Errorf(p, 0, 0, "", "%v", err)
			return nil, l
		}
		fmt.Fprintf(&sources, "{dir: %s}, ", strconv.Quote(filepath.ToSlash(abs[i])))
	}
	clusterFile := filepath.Join(tmp, "cluster.yaml")
	// userFiles names the user's paths in l as the user gave them; the
	// throwaway cluster file, which the user never sees, stands for the
	// package under test.
	userFiles := func(l diag.List) diag.List {
		for i := range l {
			if l[i].File == clusterFile {
				l[i].File, l[i].Line, l[i].Column, l[i].Field = dir, 0, 0, ""
				continue
			}
			for j, p := range paths {
				if f, ok := within(l[i].File, abs[j], p); ok {
					l[i].File = f
					break
				}
			}
		}
		return l
	}
	cluster := func(v string) (*config.Cluster, diag.List) {
		doc := "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: " + strconv.Quote(clusterName(name)) + "}\nspec:\n" +
			"  kubernetesVersion: " + lintKubernetesVersion + "\n  provider: {local: {}}\n  nodePools: [{name: workers, count: 1}]\n" +
			"  plugins:\n    sources: [" + strings.TrimSuffix(sources.String(), ", ") + "]\n    order: [control-plane]\n" +
			"    enabled: [{name: control-plane}, {name: " + strconv.Quote(name) + ", version: " + strconv.Quote(v) + "}]\n"
		return config.Parse(clusterFile, []byte(doc))
	}
	first := version
	if res.UpgradedFrom != "" {
		first = res.UpgradedFrom
	}
	cl, cl0 := cluster(first)
	if cl == nil || cl0.HasFatal() {
		return nil, append(l, userFiles(cl0)...)
	}
	stateDir := filepath.Join(tmp, "state")
	defer func() {
		// Whatever happened: the throwaway cluster goes, with its state.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		down := NewDown(a.cfg)
		down.StateDir, down.Purge, down.KeepPlugins = stateDir, true, true
		if _, dl := down.Run(dctx, cl); dl.HasFatal() {
			l = append(l, userFiles(dl)...)
		}
	}()
	up := NewUp(a.cfg)
	up.StateDir = stateDir
	up.Timeout = a.Timeout
	ur, ul := up.Run(ctx, cl)
	if l = append(l, userFiles(ul)...); ul.HasFatal() || ur == nil {
		return nil, l
	}
	res.Checks = ownChecks(ur.Checks, name)
	if res.UpgradedFrom != "" {
		next, nl := cluster(version)
		if next == nil || nl.HasFatal() {
			return nil, append(l, userFiles(nl)...)
		}
		ur, ul = up.Run(ctx, next)
		if l = append(l, userFiles(ul)...); ul.HasFatal() || ur == nil {
			return nil, l
		}
		res.Checks = ownChecks(ur.Checks, name)
	}
	target := KubeconfigTarget{Kubeconfig: ur.Kubeconfig}
	d, err := connect(ctx, a.cfg, target, deploy.Options{})
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	invs, err := d.Inventories(ctx)
	if err != nil {
		l.Errorf("", 0, 0, "", "%v", err)
		return nil, l
	}
	var rec *deploy.Record
	for _, r := range invs {
		if r.Plugin == name {
			rec = r
		}
	}
	if rec == nil {
		l.Errorf("", 0, 0, "", "plugin %s has no release record after it was installed", name)
		return nil, l
	}
	res.Objects = len(rec.Objects)
	un := NewUninstall(a.cfg)
	un.Target = target
	if _, ul := un.Run(ctx, name); ul.HasFatal() {
		return nil, append(l, ul...)
	}
	// Nothing of the plugin may be left (a namespace may take a moment to go).
	deadline := time.Now().Add(time.Minute)
	for _, ref := range rec.Objects {
		for {
			ri, err := d.Client().ResourceFor(ref)
			if err != nil {
				break // its kind went with its CRD
			}
			_, err = ri.Get(ctx, ref.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				l.Errorf("", 0, 0, "", "plugin %s left %s behind after it was uninstalled", name, ref)
				return nil, l
			}
			select {
			case <-ctx.Done():
				l.Errorf("", 0, 0, "", "%v", ctx.Err())
				return nil, l
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	res.Duration = time.Since(start)
	return res, l
}

// ownChecks are the checks of one plugin among a run's.
func ownChecks(all []check.Result, plugin string) []check.Result {
	var out []check.Result
	for _, c := range all {
		if c.Plugin == plugin {
			out = append(out, c)
		}
	}
	return out
}

// clusterName is the throwaway cluster's name: a DNS label.
func clusterName(plugin string) string {
	n := "plugin-test-" + plugin
	if len(n) > 40 {
		n = n[:40]
	}
	return n
}

// loadOne reads the one package at dir (a directory or an archive).
func loadOne(ctx context.Context, dir string) (*plugin.Package, diag.List) {
	var l diag.List
	src := source.Path(plugin.OriginUser, dir)
	vs, vl := src.List(ctx)
	l = append(l, vl...)
	if vl.HasFatal() || len(vs) != 1 {
		if len(vs) > 1 {
			l.Errorf(dir, 0, 0, "", "expected one plugin package, found %d", len(vs))
		} else if len(vs) == 0 && !vl.HasFatal() {
			l.Errorf(dir, 0, 0, "", "expected a plugin package directory (holding %s) or archive", plugin.ManifestFile)
		}
		return nil, l
	}
	pkg, pl := src.Fetch(ctx, vs[0])
	if l = append(l, pl...); pkg == nil || pl.HasFatal() {
		return nil, l
	}
	return pkg, l
}
