package action_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/sdk/siteoperator"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestDelegatedConditions: a check an expansion delegates is not run by
// kubeplug, which waits for the site operator (written with sdk/siteoperator)
// to set its condition; a skipped check is reported as skipped; an operator
// that never sets its condition times out naming it; a check no plugin has is
// an error at the expansion's field.
func TestDelegatedConditions(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"site/expansion.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Expansion
metadata: {name: cond, version: 1.0.0}
spec:
  skipConditions: [store/flaky]
  delegateConditions:
  - {check: store/ready, operator: site-storage, condition: StorageReady, timeout: 1m}
`,
		"never/expansion.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Expansion
metadata: {name: cond, version: 1.0.0}
spec:
  delegateConditions:
  - {check: store/ready, operator: site-nobody, condition: NeverReady, timeout: 3s}
`,
		"typo/expansion.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Expansion
metadata: {name: cond, version: 1.0.0}
spec:
  skipConditions: [store/flakey]
`,
		"cluster/store/plugin.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: store, version: 0.1.0}
spec:
  contributes: {kubernetes: {manifests: [manifests/]}}
  validate:
  - name: ready
    expression: {apiVersion: v1, kind: ConfigMap, namespace: exp-store, name: store, expression: "object.data.ready == 'yes'", timeout: 2s}
  - name: flaky
    expression: {apiVersion: v1, kind: ConfigMap, namespace: exp-store, name: store, expression: "false", timeout: 2s}
`,
		"cluster/store/manifests/store.yaml": `apiVersion: v1
kind: Namespace
metadata: {name: exp-store}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: store, namespace: exp-store}
data: {ready: "no"}
`,
		"cluster/cluster.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: cond}
spec:
  kubernetesVersion: 1.37.1
  plugins:
    sources: [{dir: store}]
    enabled: [{name: store}]
`,
	})
	// Expansions used by runs are packed ones.
	cfg := &action.Config{Env: func(string) (string, bool) { return "", false }, NoBuiltin: true}
	for _, n := range []string{"site", "never", "typo"} {
		if _, l := action.NewExpansionCreate(cfg).Run(ctx, filepath.Join(dir, n, "expansion.yaml"), nil, filepath.Join(dir, "exp-"+n, n+".tar")); l.HasFatal() {
			t.Fatal(l)
		}
	}
	rc := testcluster.RESTConfig(t)
	c, err := client.New(rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl := action.NewUninstall(cfg)
		cl.Target.RESTConfig = rc
		_, _ = cl.Run(context.Background(), "store", "expansion-cond")
	})
	apply := func(exp string) (*action.ApplyResult, string) {
		t.Helper()
		c := *cfg
		c.Expansions = action.ExpansionUse{Dirs: []string{filepath.Join(dir, exp)}}
		a := action.NewApply(&c)
		a.Target.RESTConfig = rc
		a.Timeout = 2 * time.Minute
		res, l := a.Run(ctx, load(t, filepath.Join(dir, "cluster/cluster.yaml")))
		return res, l.String()
	}

	// The operator: its probe passes; kubeplug's own check would not (ready: "no").
	opCtx, stop := context.WithCancel(ctx)
	defer stop()
	op := &siteoperator.Operator{Name: "site-storage", Client: c, Interval: 200 * time.Millisecond,
		Probes: map[string]siteoperator.Probe{"StorageReady": func(context.Context) (bool, string, error) { return true, "the SAN answers", nil }}}
	go func() { _ = op.Run(opCtx) }()
	res, msgs := apply("exp-site")
	if res == nil || !res.Validated {
		t.Fatalf("apply with the operator: %s", msgs)
	}
	if !strings.Contains(msgs, `validate check "flaky" of plugin store not run: expansion cond skips it (skipConditions)`) {
		t.Errorf("the skipped check is not reported: %s", msgs)
	}
	var names []string
	for _, ch := range res.Checks {
		names = append(names, ch.Name)
	}
	if len(res.Checks) != 1 || !strings.Contains(names[0], "delegated by expansion cond to operator site-storage: condition StorageReady") || !res.Checks[0].OK {
		t.Errorf("checks %+v", res.Checks)
	}
	stop()

	// An operator that never answers: the wait times out naming it.
	_, msgs = apply("exp-never")
	if !strings.Contains(msgs, "operator site-nobody: condition NeverReady on SiteCondition site-nobody") {
		t.Errorf("no operator: %s", msgs)
	}
	// A check that does not exist.
	_, msgs = apply("exp-typo")
	if !strings.Contains(msgs, `typo.tar/expansion.yaml:5:20: spec.skipConditions[0]: plugin store has no validate check "flakey" (it has: ready, flaky)`) {
		t.Errorf("unknown check: %s", msgs)
	}
}
