package action

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/check"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
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
//
// Its steps: the --upgrade-from package's checks, the throwaway cluster file,
// up (then up again at the version under test), and uninstall with the check
// that nothing is left.
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
		from, fl := a.upgradeFrom(ctx, name, version)
		if l = append(l, fl...); fl.HasFatal() {
			return nil, l
		}
		res.UpgradedFrom = from
		paths = append(paths, a.UpgradeFrom)
	}
	tc, err := newThrowaway(dir, filepath.Join(tmp, "cluster.yaml"), name, paths)
	if err != nil {
		l.Errorf(dir, 0, 0, "", "%v", err)
		return nil, l
	}
	first := version
	if res.UpgradedFrom != "" {
		first = res.UpgradedFrom
	}
	cl, cl0 := tc.cluster(first)
	if cl == nil || cl0.HasFatal() {
		return nil, append(l, tc.userFiles(cl0)...)
	}
	stateDir := filepath.Join(tmp, "state")
	defer func() {
		// Whatever happened: the throwaway cluster goes, with its state.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		down := NewDown(a.cfg)
		down.StateDir, down.Purge, down.KeepPlugins = stateDir, true, true
		if _, dl := down.Run(dctx, cl); dl.HasFatal() {
			l = append(l, tc.userFiles(dl)...)
		}
	}()
	up := NewUp(a.cfg)
	up.StateDir = stateDir
	up.Timeout = a.Timeout
	var ur *UpResult
	upOK := func(c *config.Cluster) bool {
		var ul diag.List
		ur, ul = up.Run(ctx, c)
		if l = append(l, tc.userFiles(ul)...); ul.HasFatal() || ur == nil {
			return false
		}
		res.Checks = ownChecks(ur.Checks, name)
		return true
	}
	if !upOK(cl) {
		return nil, l
	}
	if first != version { // then the upgrade to the version under test
		next, nl := tc.cluster(version)
		if next == nil || nl.HasFatal() {
			return nil, append(l, tc.userFiles(nl)...)
		}
		if !upOK(next) {
			return nil, l
		}
	}
	n, ul := a.uninstallLeavesNothing(ctx, KubeconfigTarget{Kubeconfig: ur.Kubeconfig}, name)
	if l = append(l, ul...); ul.HasFatal() {
		return nil, l
	}
	res.Objects = n
	res.Duration = time.Since(start)
	return res, l
}

// upgradeFrom checks the --upgrade-from package: the same plugin as the one
// under test, at another version, which it returns.
func (a *PluginTest) upgradeFrom(ctx context.Context, name, version string) (string, diag.List) {
	prev, l := loadOne(ctx, a.UpgradeFrom)
	switch {
	case prev == nil:
		return "", l
	case prev.Manifest.Metadata.Name != name:
		l.Errorf(a.UpgradeFrom, 0, 0, "metadata.name", "--upgrade-from is plugin %s, not %s", prev.Manifest.Metadata.Name, name)
	case prev.Manifest.Metadata.Version == version:
		l.Errorf(a.UpgradeFrom, 0, 0, "metadata.version", "--upgrade-from has the same version (%s) as the package under test", version)
	}
	return prev.Manifest.Metadata.Version, l
}

// throwaway is the cluster file of plugin test's own cluster, which the user
// never sees: its sources are the user's paths.
type throwaway struct {
	dir, file, plugin string
	paths, abs        []string
	sources           string
}

func newThrowaway(dir, file, plugin string, paths []string) (*throwaway, error) {
	t := &throwaway{dir: dir, file: file, plugin: plugin, paths: paths, abs: make([]string, len(paths))}
	var sources []string
	for i, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		t.abs[i] = abs
		sources = append(sources, fmt.Sprintf("{dir: %s}", strconv.Quote(filepath.ToSlash(abs))))
	}
	t.sources = strings.Join(sources, ", ")
	return t, nil
}

// cluster is the throwaway cluster file with the plugin at version v.
func (t *throwaway) cluster(v string) (*config.Cluster, diag.List) {
	doc := "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: " + strconv.Quote(clusterName(t.plugin)) + "}\nspec:\n" +
		"  kubernetesVersion: " + lintKubernetesVersion + "\n  provider: {local: {}}\n  nodePools: [{name: workers, count: 1}]\n" +
		"  plugins:\n    sources: [" + t.sources + "]\n    order: [control-plane]\n" +
		"    enabled: [{name: control-plane}, {name: " + strconv.Quote(t.plugin) + ", version: " + strconv.Quote(v) + "}]\n"
	return config.Parse(t.file, []byte(doc))
}

// userFiles names the user's paths in l as the user gave them; the
// throwaway cluster file stands for the package under test.
func (t *throwaway) userFiles(l diag.List) diag.List {
	for i := range l {
		if l[i].File == t.file {
			l[i].File, l[i].Line, l[i].Column, l[i].Field = t.dir, 0, 0, ""
			continue
		}
		for j, p := range t.paths {
			if f, ok := within(l[i].File, t.abs[j], p); ok {
				l[i].File = f
				break
			}
		}
	}
	return l
}

// uninstallLeavesNothing uninstalls plugin from target and checks that none
// of the objects its release record lists is left (a namespace may take a
// moment to go); it returns how many objects it had.
func (a *PluginTest) uninstallLeavesNothing(ctx context.Context, target KubeconfigTarget, name string) (int, diag.List) {
	var l diag.List
	fail := func(format string, args ...any) (int, diag.List) {
		l.Errorf("", 0, 0, "", format, args...)
		return 0, l
	}
	d, err := connect(ctx, a.cfg, target, deploy.Options{})
	if err != nil {
		return fail("%v", err)
	}
	invs, err := d.Inventories(ctx)
	if err != nil {
		return fail("%v", err)
	}
	i := slices.IndexFunc(invs, func(r *deploy.Record) bool { return r.Plugin == name })
	if i < 0 {
		return fail("plugin %s has no release record after it was installed", name)
	}
	rec := invs[i]
	un := NewUninstall(a.cfg)
	un.Target = target
	if _, ul := un.Run(ctx, name); ul.HasFatal() {
		return 0, ul
	}
	deadline := time.Now().Add(time.Minute)
	for _, ref := range rec.Objects {
		switch err := waitGone(ctx, d, ref, deadline); {
		case errors.Is(err, errStillThere):
			return fail("plugin %s left %s behind after it was uninstalled", name, ref)
		case err != nil:
			return fail("%v", err)
		}
	}
	return len(rec.Objects), l
}

// errStillThere is an object not gone by the deadline.
var errStillThere = errors.New("still there")

// waitGone waits until the object ref is gone (or its kind, with its CRD),
// until deadline.
func waitGone(ctx context.Context, d *deploy.Deployer, ref kube.ObjRef, deadline time.Time) error {
	for {
		ri, err := d.Client().ResourceFor(ref)
		if err != nil {
			return nil // its kind went with its CRD
		}
		if _, err = ri.Get(ctx, ref.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return errStillThere
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
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
