package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/pkg/expansion"
	_ "github.com/kubeplug/kubeplug/pkg/provider/local" // the provider of TestManagedClusterExpansionUp
	"github.com/kubeplug/kubeplug/pkg/sign"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// expansionRunner is the fake runner, which also reads the expansions each
// up is given as action.Up reads them (expansion.Scan of its directories with
// its keys, then the cluster file's allowlist): what it found is what up
// would merge.
type expansionRunner struct {
	*fakeRunner
	mu sync.Mutex
	// seen are, per up of a cluster, the expansions found with what they
	// skip, or the error reading them.
	seen map[string][]string
}

func (e *expansionRunner) Up(ctx context.Context, cl *config.Cluster, run controller.ClusterRun) ([]byte, error) {
	got := "none"
	if use := run.Expansions; len(use.Dirs) > 0 {
		got = e.read(ctx, cl, use.Dirs, use.Keys)
	}
	e.mu.Lock()
	e.seen[cl.Spec.Metadata.Name] = append(e.seen[cl.Spec.Metadata.Name], got)
	e.mu.Unlock()
	return e.fakeRunner.Up(ctx, cl, run)
}

func (e *expansionRunner) read(ctx context.Context, cl *config.Cluster, dirs, keyFiles []string) string {
	var keys []*sign.PublicKey
	for _, f := range keyFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return err.Error()
		}
		k, err := sign.LoadPublicKey(f, b)
		if err != nil {
			return err.Error()
		}
		keys = append(keys, k)
	}
	work, err := os.MkdirTemp("", "expansion-runner-")
	if err != nil {
		return err.Error()
	}
	defer os.RemoveAll(work)
	set, l := expansion.Scan(ctx, expansion.UseOptions{Dirs: dirs, Keys: keys, WorkDir: work})
	if l.HasFatal() {
		return l.Err().Error()
	}
	if x := cl.Spec.Spec.Expansions; x == nil || x.Allow == nil {
		return "no allowlist in the cluster file"
	} else if al := set.CheckAllowed(x.Allow, cl.File); al.HasFatal() {
		return al.Err().Error()
	}
	var out []string
	for _, x := range set.Expansions {
		out = append(out, x.Name())
	}
	if by, ok := set.Skips("validate"); ok {
		out = append(out, "validate skipped by "+by)
	}
	return strings.Join(out, ", ")
}

func (e *expansionRunner) ups(name string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.seen[name]...)
}

// TestManagedClusterExpansions: a ManagedCluster's spec.expansions reach its
// own up, as `kubeplug up --expansion-dir` takes them. Signed by a trusted
// key and within spec.expansionSite.allow: up is given the pulled expansion
// and its keys (read as action.Up reads them, with the allowlist in the
// cluster file), and status.expansions names it with the step it skips and
// the check it delegates. Signed by an untrusted key, or skipping a step the
// allowlist lacks: Stalled, ExpansionRefused, naming the reference, the keys'
// ConfigMap or the step and field, and up does not run. suspendExpansions
// runs up without them.
func TestManagedClusterExpansions(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt = "ctrl-mcexp"
	namespace(t, cs, mgmt)
	kc, err := os.ReadFile(testcluster.ControlPlane(t).KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	host := loopbackRegistry(t)
	trusted, trustedPub := signer(t)
	rogue, _ := signer(t)
	signedRef := "oci://" + host + "/expansions/site:1.0.0"
	rogueRef := "oci://" + host + "/expansions/rogue:1.0.0"
	const skips = "  skipSteps: [validate]\n  delegateConditions: [{check: app/ready, operator: site-app, condition: AppReady}]\n"
	pushExpansionWith(t, "mc", trusted, signedRef, skips)
	pushExpansionWith(t, "mc", rogue, rogueRef, "")
	for _, o := range []any{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hosts-key", Namespace: mgmt}, Type: corev1.SecretTypeSSHAuth,
			Data: map[string][]byte{corev1.SSHAuthPrivateKey: []byte("TEST KEY")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "site-keys", Namespace: mgmt}, Data: map[string]string{"site.pub": string(trustedPub)}},
	} {
		var err error
		switch o := o.(type) {
		case *corev1.Secret:
			_, err = cs.CoreV1().Secrets(mgmt).Create(t.Context(), o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps(mgmt).Create(t.Context(), o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	runner := &expansionRunner{fakeRunner: &fakeRunner{kubeconfig: kc}, seen: map[string][]string{}}
	startClusterController(t, rc, runner)

	mc := func(name, ref, allow string) string {
		return `apiVersion: kubeplug.dev/v1alpha1
kind: ManagedCluster
metadata: {name: ` + name + `}
spec:
  sshKeySecret: {name: hosts-key}
  expansions: [{ref: "` + ref + `", verifyKeys: site-keys}]
  expansionSite:
    allow: ` + allow + `
  clusterFile: |
` + indent(hostsClusterFile(name, ""), "    ")
	}
	create(t, dc, mclGVR, mgmt, mc("edge", signedRef, `{skipSteps: [validate], delegateConditions: ["app/*"]}`))
	create(t, dc, mclGVR, mgmt, mc("rogue", rogueRef, `{skipSteps: [validate]}`))
	create(t, dc, mclGVR, mgmt, mc("strict", signedRef, `{skipSteps: [after-deploy], delegateConditions: ["app/*"]}`))

	// Trusted and allowed: up reads the expansion, the status names it.
	if _, msg := conditionOf(t, dc, mgmt, "edge", "Ready", "True"); !strings.Contains(msg, "with expansion(s) site 1.0.0 ("+signedRef+", signed by "+trusted.KeyID()+")") {
		t.Errorf("edge Ready: %s", msg)
	}
	if got := runner.ups("edge"); len(got) != 1 || got[0] != "site@1.0.0, validate skipped by site" {
		t.Errorf("edge's up was given %q; want the expansion site, skipping validate", got)
	}
	u, err := dc.Resource(mclGVR).Namespace(mgmt).Get(t.Context(), "edge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exps, _, _ := unstructured.NestedSlice(u.Object, "status", "expansions")
	if got := fmt.Sprint(exps); len(exps) != 1 || !strings.Contains(got, "target:edge") || !strings.Contains(got, "signedBy:"+trusted.KeyID()) ||
		!strings.Contains(got, "skips:[step validate check app/ready delegated to operator site-app]") {
		t.Errorf("edge status.expansions = %s", got)
	}

	// Untrusted signer; a step beyond the allowlist: Stalled, up not run.
	reason, msg := conditionOf(t, dc, mgmt, "rogue", "Stalled", "True")
	for _, want := range []string{rogueRef, "site.pub", trusted.KeyID(), "ConfigMap " + mgmt + "/site-keys", "up not run"} {
		if reason != controller.ReasonExpansionRefused || !strings.Contains(msg, want) {
			t.Errorf("rogue Stalled: %s: %s; want ExpansionRefused with %q", reason, msg, want)
		}
	}
	reason, msg = conditionOf(t, dc, mgmt, "strict", "Stalled", "True")
	for _, want := range []string{"expansion site skips step validate", "ManagedCluster " + mgmt + "/strict: spec.expansionSite.allow.skipSteps", "it allows after-deploy"} {
		if reason != controller.ReasonExpansionRefused || !strings.Contains(msg, want) {
			t.Errorf("strict Stalled: %s: %s; want ExpansionRefused with %q", reason, msg, want)
		}
	}
	if r, s := runner.ups("rogue"), runner.ups("strict"); len(r)+len(s) != 0 {
		t.Errorf("up ran for a refused expansion: rogue %q, strict %q", r, s)
	}

	// The switch: up again, without the expansions.
	edit(t, dc, mclGVR, mgmt, "edge", func(spec map[string]any) { spec["suspendExpansions"] = true })
	waitFor(t, time.Minute, "edge up again without expansions", func() (bool, string) {
		u, err := dc.Resource(mclGVR).Namespace(mgmt).Get(t.Context(), "edge", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		exps, _, _ := unstructured.NestedSlice(u.Object, "status", "expansions")
		st, _, msg := condition(u, "Ready")
		ups := runner.ups("edge")
		return st == "True" && len(exps) == 0 && strings.Contains(msg, "suspended by spec.suspendExpansions of the ManagedCluster "+mgmt+"/edge") &&
			len(ups) == 2 && ups[1] == "none", fmt.Sprint(st, msg, exps, ups)
	})

	for _, name := range []string{"edge", "rogue", "strict"} {
		deleted(t, dc, mgmt, name)
	}
}

// TestManagedClusterExpansionUp runs a ManagedCluster's up for real, with
// action.Up (the controller's own runner) on the local provider, allowed for
// the test: its expansion, pulled from a registry on loopback, skips the
// provider's step node-routes under spec.expansionSite.allow and runs an
// afterInstall hook, which gets a KUBECONFIG reaching the cluster being
// built, the one the ManagedCluster then publishes. Deleting it runs down.
func TestManagedClusterExpansionUp(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt = "ctrl-mcexpup"
	namespace(t, cs, mgmt)
	host := loopbackRegistry(t)
	trusted, trustedPub := signer(t)
	ref := "oci://" + host + "/expansions/site:1.0.0"
	pushExpansionFiles(t, trusted, ref, map[string]string{
		"expansion.yaml": `apiVersion: kubeplug.dev/v1alpha1
kind: Expansion
metadata: {name: site, version: 1.0.0}
spec:
  skipSteps: [provider/node-routes]
  hooks:
  - {name: mark, at: afterInstall, script: hooks/mark.sh}
`,
		"hooks/mark.sh": "#!/bin/sh\ncp \"$KUBECONFIG\" \"$KP_TEST_MARK\"\n",
	})
	mark := filepath.Join(t.TempDir(), "hook.kubeconfig")
	t.Setenv("KP_TEST_MARK", mark)
	if _, err := cs.CoreV1().ConfigMaps(mgmt).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "site-keys", Namespace: mgmt}, Data: map[string]string{"site.pub": string(trustedPub)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startClusterController(t, rc, nil, func(o *controller.Options) {
		o.ClusterRunner, o.ClusterProviders, o.Action = nil, []string{"local"}, &action.Config{}
	})
	create(t, dc, mclGVR, mgmt, `apiVersion: kubeplug.dev/v1alpha1
kind: ManagedCluster
metadata: {name: loc}
spec:
  expansions: [{ref: "`+ref+`", verifyKeys: site-keys}]
  expansionSite:
    allow: {skipSteps: [provider/node-routes]}
  clusterFile: |
    apiVersion: kubeplug.dev/v1alpha1
    kind: Cluster
    metadata: {name: loc}
    spec:
      kubernetesVersion: 1.37.1
      provider: {local: {}}
      nodePools: [{name: workers, count: 1}]
      plugins:
        enabled: [{name: control-plane}]
`)
	// Down, even when the test fails: the cluster's processes are the
	// controller's children. (t.Context is done when cleanups run.)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := dc.Resource(mclGVR).Namespace(mgmt).Delete(ctx, "loc", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete ManagedCluster loc: %v", err)
			return
		}
		for ctx.Err() == nil {
			if _, err := dc.Resource(mclGVR).Namespace(mgmt).Get(ctx, "loc", metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(time.Second)
		}
		t.Errorf("ManagedCluster loc not gone (down not done) after 3 min")
	})
	waitFor(t, 5*time.Minute, "ManagedCluster loc Ready", func() (bool, string) {
		u, err := dc.Resource(mclGVR).Namespace(mgmt).Get(t.Context(), "loc", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, reason, msg := condition(u, "Ready")
		if f, _, fmsg := condition(u, "Failed"); f == "True" {
			t.Fatalf("Failed: %s", fmsg)
		}
		return st == "True", reason + ": " + msg
	})
	u, err := dc.Resource(mclGVR).Namespace(mgmt).Get(t.Context(), "loc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exps, _, _ := unstructured.NestedSlice(u.Object, "status", "expansions")
	if got := fmt.Sprint(exps); len(exps) != 1 || !strings.Contains(got, "skips:[step provider/node-routes]") {
		t.Errorf("status.expansions = %s", got)
	}
	// The hook's KUBECONFIG reaches the cluster published, and only it.
	hook, err := clientcmd.LoadFromFile(mark)
	if err != nil {
		t.Fatalf("the afterInstall hook did not run: %v", err)
	}
	sec, err := cs.CoreV1().Secrets(mgmt).Get(t.Context(), "loc-kubeconfig", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	published, err := clientcmd.Load(sec.Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	server := func(c *clientcmdapi.Config) string {
		if ctx := c.Contexts[c.CurrentContext]; ctx != nil && c.Clusters[ctx.Cluster] != nil {
			return c.Clusters[ctx.Cluster].Server
		}
		return ""
	}
	if len(hook.Clusters) != 1 || server(hook) == "" || server(hook) != server(published) {
		t.Errorf("the hook's KUBECONFIG reaches %q (%d clusters); the published kubeconfig %q", server(hook), len(hook.Clusters), server(published))
	}
}
