package controller_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// shardsEnv and replicaEnv make a child replica sharded (runChild): the number
// of shards, and the replica's id.
const (
	shardsEnv  = "KUBEPLUG_CONTROLLER_TEST_SHARDS"
	replicaEnv = "KUBEPLUG_CONTROLLER_TEST_REPLICA"
)

// TestShardsKillNine runs three sharded replicas (six shards) over six
// TargetClusters: the shards are spread two per replica; every installation is
// applied by exactly one replica, the one holding its cluster's shard; then the
// replica holding the first cluster's shard is killed with SIGKILL, the two
// left take its shards over once its Leases expire (three each), and an edit
// of every installation converges, those of the killed replica's clusters
// applied by the replica that took their shard; a replica stopped with SIGTERM
// gives its shards up at once.
func TestShardsKillNine(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	cs := testcluster.Client(t)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(t, rc)
	const mgmt, shards, n = "ctrl-shards", 6, 6
	namespace(t, cs, mgmt)
	namespace(t, cs, "kubeplug-system")
	// Each TargetCluster is the management cluster under another name: another
	// key, so another shard (the applies to it take turns on its operation lease).
	self := testcluster.ControlPlane(t).KubeconfigPath()
	for i := range n {
		kubeconfig(t, cs, mgmt, fmt.Sprint("t", i), self, "shards")
		catalogConfigMap(t, cs, mgmt, fmt.Sprint("packages-", i), catalogPackages(t, fmt.Sprint("ctrl-shards-", i), fmt.Sprint("sh", i, "-")))
		create(t, dc, catGVR, mgmt, fmt.Sprintf(`{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: main-%d}, spec: {sources: [{configMap: packages-%d}]}}`, i, i))
	}

	replicas := map[string]*replica{}
	for _, id := range []string{"a", "b", "c"} {
		replicas[id] = startReplica(t, id, "", shardsEnv+"="+fmt.Sprint(shards), replicaEnv+"="+id)
	}
	holders := func() map[int]string {
		out := map[int]string{}
		list, err := cs.CoordinationV1().Leases("kubeplug-system").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			l := &list.Items[i]
			var s int
			if _, err := fmt.Sscanf(l.Name, "kubeplug-controller-shard-%d", &s); err == nil && l.Spec.HolderIdentity != nil && !expired(l) {
				out[s] = *l.Spec.HolderIdentity
			}
		}
		return out
	}
	balanced := func(ids ...string) func() (bool, string) {
		return func() (bool, string) {
			h := holders()
			count := map[string]int{}
			for _, id := range h {
				count[id]++
			}
			ok := len(h) == shards
			for _, id := range ids {
				ok = ok && count[id] == shards/len(ids)
			}
			return ok, fmt.Sprint(h)
		}
	}
	waitFor(t, time.Minute, "the shards spread two per replica", balanced("a", "b", "c"))

	var names []string
	for i := range n {
		name := fmt.Sprint("inst-", i)
		names = append(names, name)
		create(t, dc, instGVR, mgmt, fmt.Sprintf(`{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: %s}, spec: {target: t%d, catalogs: [main-%d], plugins: [{name: sh%d-app, values: {message: one}}]}}`, name, i, i, i))
	}
	uninstallAtEnd(t, dc, mgmt, names...)
	for _, name := range names {
		readyAt(t, dc, instGVR, mgmt, name, 3*time.Minute)
	}
	shardOfTarget := func(i int) int { return shardOf(mgmt+"/"+fmt.Sprint("t", i), shards) }
	h := holders()
	for i, name := range names {
		got := appliedBy(t, replicas, name)
		if want := h[shardOfTarget(i)]; len(got) != 1 || got[0] != want {
			t.Errorf("%s (cluster t%d, shard %d held by %s) was applied by %v, want by %s alone", name, i, shardOfTarget(i), want, got, want)
		}
	}

	// Kill the holder of t0's shard.
	victim := h[shardOfTarget(0)]
	if err := replicas[victim].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-replicas[victim].done
	var survivors []string
	for id := range replicas {
		if id != victim {
			survivors = append(survivors, id)
		}
	}
	slices.Sort(survivors)
	for _, name := range names {
		edit(t, dc, instGVR, mgmt, name, func(spec map[string]any) {
			spec["plugins"].([]any)[0].(map[string]any)["values"] = map[string]any{"message": "two"}
		})
	}
	waitFor(t, time.Minute, "the killed replica's shards taken over", balanced(survivors...))
	for i, name := range names {
		readyAt(t, dc, instGVR, mgmt, name, 3*time.Minute)
		if data, err := message(t, cs, fmt.Sprint("ctrl-shards-", i)); err != nil || data["message"] != "two" {
			t.Errorf("%s: app-settings %v, %v", name, data, err)
		}
	}
	after := holders()
	for i, name := range names {
		got := appliedBy(t, replicas, name)
		if owner := after[shardOfTarget(i)]; !slices.Contains(got, owner) || slices.Contains(survivors, h[shardOfTarget(i)]) && len(got) != 1 {
			t.Errorf("%s (shard %d: held by %s, then %s) was applied by %v", name, shardOfTarget(i), h[shardOfTarget(i)], owner, got)
		}
	}
	if got := appliedBy(t, replicas, "inst-0"); !slices.Contains(got, victim) || len(got) != 2 {
		t.Errorf("inst-0 was applied by %v, want by %s and then the replica that took its shard", got, victim)
	}
	t.Logf("shards before the kill %v, after %v (killed %s)", h, after, victim)

	// A replica stopped with SIGTERM gives its shards up at once: the last one
	// holds all six sooner than the Leases (6 s) could expire.
	stopped, last := replicas[survivors[0]], survivors[1]
	if err := stopped.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-stopped.done
	waitFor(t, 4*time.Second, "the stopped replica's shards taken at once", balanced(last))
}

func expired(l *coordinationv1.Lease) bool {
	return l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil ||
		time.Now().After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second))
}

// appliedBy lists the replicas whose log says they applied the installation
// (each once, sorted).
func appliedBy(t *testing.T, replicas map[string]*replica, name string) []string {
	t.Helper()
	re := regexp.MustCompile(`msg="installation applied" installation=ctrl-shards/` + regexp.QuoteMeta(name) + ` `)
	var out []string
	for id, r := range replicas {
		b, err := os.ReadFile(r.log)
		if err != nil {
			t.Fatal(err)
		}
		if re.Match(b) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// shardOf is the controller's stable hash (pkg/controller shards.go), stated
// again: the test checks the controller against it.
func shardOf(key string, n int) int {
	var h uint32 = 2166136261
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}
