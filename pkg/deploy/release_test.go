package deploy_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/deploy/state"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

func history(t testing.TB, d *deploy.Deployer, plugin string) []deploy.Revision {
	t.Helper()
	h, err := d.History(context.Background(), plugin)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// summary renders a history as "1:Superseded:1.0.0 2:Ready:2.0.0".
func summary(h []deploy.Revision) string {
	var parts []string
	for _, r := range h {
		parts = append(parts, fmt.Sprintf("%d:%s:%s", r.Revision, r.Status, r.Version))
	}
	return strings.Join(parts, " ")
}

// recordSecrets lists the names of a plugin's record Secrets of one part (head or chunk).
func recordSecrets(t testing.TB, plugin, part string) []string {
	t.Helper()
	list, err := testcluster.Client(t).CoreV1().Secrets("kubeplug-system").List(context.Background(), metav1.ListOptions{
		LabelSelector: "owner=kubeplug,kubeplug.dev/part=" + part + ",kubeplug.dev/plugin=" + plugin,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		if s.Type != state.RecordType {
			t.Errorf("record Secret %s has type %q", s.Name, s.Type)
		}
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

func cms(t testing.TB, ns string, data map[string]string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range data {
			if !yield(k) {
				return
			}
		}
	}) {
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"data":     map[string]any{"v": data[name]},
		}})
	}
	return out
}

func cmValue(t testing.TB, ns, name string) string {
	t.Helper()
	got, err := testcluster.Client(t).CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Data["v"]
}

func TestUpgradeRecordsARevisionReapplyDoesNotAndHistoryIsBounded(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "revs")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute, HistoryMax: 3})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	apply := func(version, values string) {
		t.Helper()
		u := deploy.Unit{Plugin: plugin, Version: version, ValuesDigest: "sha256:" + values, Digest: "sha256:pkg-" + version, Objects: cms(t, ns, map[string]string{"a": values})}
		if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{u}); err != nil {
			t.Fatal(err)
		}
	}
	apply("1.0.0", "one")
	apply("1.0.0", "one") // nothing changed
	if got := summary(history(t, d, plugin)); got != "1:Ready:1.0.0" {
		t.Fatalf("history after a re-apply = %s, want one revision", got)
	}
	apply("1.1.0", "one")
	apply("1.1.0", "two") // values only
	h := history(t, d, plugin)
	if got := summary(h); got != "1:Superseded:1.0.0 2:Superseded:1.1.0 3:Ready:1.1.0" {
		t.Fatalf("history = %s", got)
	}
	if h[0].Description != "install 1.0.0" || h[1].Description != "upgrade 1.0.0 to 1.1.0" || h[2].Description != "apply 1.1.0: values changed" {
		t.Errorf("descriptions = %q, %q, %q", h[0].Description, h[1].Description, h[2].Description)
	}
	if h[2].Started.IsZero() || h[2].Objects != 1 || h[2].Values != "two" {
		t.Errorf("revision 3 = %+v", h[2])
	}
	apply("1.2.0", "two")
	apply("1.3.0", "two")
	if got := summary(history(t, d, plugin)); got != "3:Superseded:1.1.0 4:Superseded:1.2.0 5:Ready:1.3.0" {
		t.Errorf("history with HistoryMax 3 = %s", got)
	}
	// Only the kept revisions have Secrets: heads and the chunks they name.
	if heads := recordSecrets(t, plugin, "head"); len(heads) != 3 {
		t.Errorf("heads = %v, want 3", heads)
	}
	for _, c := range recordSecrets(t, plugin, "chunk") {
		if strings.Contains(c, ".v1.") || strings.Contains(c, ".v2.") {
			t.Errorf("chunk %s of a dropped revision is left", c)
		}
	}
	if got := inventory(t, d, plugin); got == nil || got.Revision != 5 || got.Version != "1.3.0" || got.PackageDigest != "sha256:pkg-1.3.0" {
		t.Errorf("newest record = %+v", got)
	}
}

func TestDowngradeRefusedUnlessAllowed(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "down")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	unit := func(version string, allow bool) []deploy.Unit {
		return []deploy.Unit{{Plugin: plugin, Version: version, AllowDowngrade: allow, Objects: cms(t, ns, map[string]string{"a": version})}}
	}
	if _, err := d.ApplyWave(t.Context(), 0, unit("2.0.0", false)); err != nil {
		t.Fatal(err)
	}
	// Refused, naming plugin, both versions and the way out; nothing changed.
	_, err := d.ApplyWave(t.Context(), 0, unit("1.0.0", false))
	if !errors.Is(err, deploy.ErrDowngrade) {
		t.Fatalf("downgrade: %v, want ErrDowngrade", err)
	}
	for _, want := range []string{"plugin " + plugin + " 2.0.0 is installed", "1.0.0 is older", "--allow-downgrade", "spec.upgrade.allowDowngrade"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if err := d.CheckDowngrade(t.Context(), plugin, "1.0.0"); !errors.Is(err, deploy.ErrDowngrade) {
		t.Errorf("CheckDowngrade = %v", err)
	}
	if v := cmValue(t, ns, "a"); v != "2.0.0" {
		t.Errorf("a refused downgrade changed the object: %s", v)
	}
	if got := summary(history(t, d, plugin)); got != "1:Ready:2.0.0" {
		t.Errorf("a refused downgrade changed the history: %s", got)
	}
	// Allowed by the option.
	allowed := newDeployer(t, deploy.Options{Timeout: time.Minute, AllowDowngrade: true})
	if _, err := allowed.ApplyWave(t.Context(), 0, unit("1.0.0", false)); err != nil {
		t.Fatalf("downgrade with AllowDowngrade: %v", err)
	}
	if v := cmValue(t, ns, "a"); v != "1.0.0" {
		t.Errorf("after the allowed downgrade a = %s", v)
	}
	if h := history(t, d, plugin); h[len(h)-1].Description != "downgrade 2.0.0 to 1.0.0" {
		t.Errorf("description = %q", h[len(h)-1].Description)
	}
	// Allowed by the installed version's declaration, not the new one's.
	if _, err := d.ApplyWave(t.Context(), 0, unit("3.0.0", true)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ApplyWave(t.Context(), 0, unit("2.5.0", false)); err != nil {
		t.Fatalf("downgrade from a version declaring allowDowngrade: %v", err)
	}
	if _, err := d.ApplyWave(t.Context(), 0, unit("2.0.0", true)); !errors.Is(err, deploy.ErrDowngrade) {
		t.Errorf("downgrade from 2.5.0, which did not declare it, declared by the older version: %v", err)
	}
}

func TestManualRollbackRestoresObjectsAndHelmRelease(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "rb")
	chrt := testChart(t)
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	apply := func(version string, data map[string]string, msg string) {
		t.Helper()
		u := deploy.Unit{Plugin: plugin, Version: version, Objects: cms(t, ns, data),
			Releases: []deploy.HelmRelease{{Name: "web", Namespace: ns, Chart: chrt, Values: map[string]any{"message": msg}}}}
		if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{u}); err != nil {
			t.Fatal(err)
		}
	}
	apply("1.0.0", map[string]string{"kept": "1", "dropped": "1"}, "one")
	// 2.0.0 changes kept, prunes dropped, adds added and upgrades the release.
	apply("2.0.0", map[string]string{"kept": "2", "added": "2"}, "two")
	if exists(t, cmGVR, ns, "dropped") || message(t, ns, "web-msg") != "two" {
		t.Fatal("the upgrade did not prune or did not upgrade the release")
	}
	// A server-side dry run of the rollback says which revision it would restore
	// and changes nothing: no object, no Helm release, no record.
	dry := newDeployer(t, deploy.Options{Timeout: time.Minute, DryRun: true})
	if rec, err := dry.Rollback(t.Context(), plugin, 0); err != nil || rec.Revision != 1 {
		t.Fatalf("dry-run rollback: %+v %v", rec, err)
	}
	if cmValue(t, ns, "kept") != "2" || exists(t, cmGVR, ns, "dropped") || message(t, ns, "web-msg") != "two" ||
		summary(history(t, d, plugin)) != "1:Superseded:1.0.0 2:Ready:2.0.0" {
		t.Fatalf("a dry-run rollback changed the cluster: history %s", summary(history(t, d, plugin)))
	}
	rec, err := d.Rollback(t.Context(), plugin, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Revision != 3 || rec.Version != "1.0.0" || rec.Description != "rollback to 1" || rec.Phase != deploy.PhaseReady {
		t.Errorf("rollback record = %+v", rec)
	}
	if v := cmValue(t, ns, "kept"); v != "1" {
		t.Errorf("kept = %s after the rollback, want 1", v)
	}
	if !exists(t, cmGVR, ns, "dropped") {
		t.Error("the object 2.0.0 pruned did not come back")
	}
	if exists(t, cmGVR, ns, "added") {
		t.Error("the object 2.0.0 added is still there")
	}
	if m := message(t, ns, "web-msg"); m != "one" {
		t.Errorf("Helm release message = %q, want one", m)
	}
	if rev, st := revision(t, ns, "web"); rev != 3 || st != "deployed" {
		t.Errorf("Helm release revision %d %s, want 3 deployed (rollback to 1)", rev, st)
	}
	if got := summary(history(t, d, plugin)); got != "1:Superseded:1.0.0 2:Superseded:2.0.0 3:Ready:1.0.0" {
		t.Errorf("history = %s", got)
	}
	if inv := inventory(t, d, plugin); inv.HelmRevisions[ns+"/web"] != 3 || len(inv.Objects) != 4 {
		t.Errorf("record after rollback = %+v, want Helm revision 3 and 4 objects", inv)
	}
	// The newer version applies again over the rollback: an upgrade, no refusal.
	apply("2.0.0", map[string]string{"kept": "2", "added": "2"}, "two")
	if exists(t, cmGVR, ns, "dropped") || !exists(t, cmGVR, ns, "added") {
		t.Error("re-applying 2.0.0 after the rollback did not converge")
	}
	// An explicit revision; one beyond the history is a clear error.
	if _, err := d.Rollback(t.Context(), plugin, 1); err != nil {
		t.Fatal(err)
	}
	if v := cmValue(t, ns, "kept"); v != "1" {
		t.Errorf("kept = %s after rollback to 1", v)
	}
	if _, err := d.Rollback(t.Context(), plugin, 42); err == nil || !strings.Contains(err.Error(), "plugin "+plugin+" has no revision 42") {
		t.Errorf("rollback to a missing revision: %v", err)
	}
}

func TestRollbackOnFailureRestoresThePreviousRevision(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "auto")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute, RollbackOnFailure: true})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	good := cms(t, ns, map[string]string{"a": "1"})
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: good}}); err != nil {
		t.Fatal(err)
	}
	bad := append(cms(t, ns, map[string]string{"a": "2", "b": "2"}), objs(t, ns, stuckDeployment("stuck"))...)
	short := newDeployer(t, deploy.Options{Timeout: 6 * time.Second, RollbackOnFailure: true})
	_, err := short.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "2.0.0", Objects: bad}})
	if err == nil {
		t.Fatal("a Deployment that cannot schedule became ready")
	}
	for _, want := range []string{"Deployment.apps/" + ns + "/stuck", "rolled plugin " + plugin + " back to revision 1 (1.0.0)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if v := cmValue(t, ns, "a"); v != "1" {
		t.Errorf("a = %s after the automatic rollback", v)
	}
	if exists(t, cmGVR, ns, "b") || exists(t, depGVR, ns, "stuck") {
		t.Error("objects only the failed revision had are left")
	}
	h := history(t, d, plugin)
	if got := summary(h); got != "1:Superseded:1.0.0 2:Failed:2.0.0 3:Ready:1.0.0" {
		t.Errorf("history = %s", got)
	}
	if !strings.Contains(h[1].Message, "stuck") || h[2].Description != "rollback to 1: revision 2 failed" {
		t.Errorf("failed revision message %q, rollback description %q", h[1].Message, h[2].Description)
	}

	// A new plugin that fails is uninstalled.
	fresh := unique(t, "fresh")
	_, err = short.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: fresh, Version: "1.0.0", Objects: objs(t, ns, `
apiVersion: v1
kind: ConfigMap
metadata: {name: fresh, namespace: NS}
---
`+stuckDeployment("stuck2"))}})
	if err == nil || !strings.Contains(err.Error(), "uninstalled plugin "+fresh+", which was new") {
		t.Fatalf("failed install with RollbackOnFailure: %v", err)
	}
	if exists(t, cmGVR, ns, "fresh") || inventory(t, d, fresh) != nil || len(recordSecrets(t, fresh, "head")) != 0 {
		t.Error("the failed new plugin left objects or records")
	}
}

// randomData is base64 of random bytes: gzip cannot shrink it much.
func randomData(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n*3/4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func TestReleaseOfSeveralMegabytesIsChunked(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "large")
	d := newDeployer(t, deploy.Options{Timeout: 2 * time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	// Six ConfigMaps of 700 KB of random data: about 4 MB, over 3 MB compressed.
	v1 := map[string]string{}
	for i := range 6 {
		v1[fmt.Sprintf("big-%d", i)] = randomData(t, 700_000)
	}
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: cms(t, ns, v1)}}); err != nil {
		t.Fatal(err)
	}
	chunks := recordSecrets(t, plugin, "chunk")
	if len(chunks) < 6 {
		t.Fatalf("chunks = %v, want at least 6 of 512 KiB for over 3 MB", chunks)
	}
	total := 0
	for _, c := range chunks {
		s, err := testcluster.Client(t).CoreV1().Secrets("kubeplug-system").Get(t.Context(), c, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(s.Data["chunk"]); n > state.ChunkSize {
			t.Errorf("chunk %s holds %d bytes, over %d", c, n, state.ChunkSize)
		}
		total += len(s.Data["chunk"])
	}
	if total < 3<<20 {
		t.Errorf("compressed objects = %d bytes, want a release over 3 MiB compressed", total)
	}
	back, err := d.RecordedObjects(t.Context(), plugin, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 6 {
		t.Fatalf("read back %d objects, want 6", len(back))
	}
	for _, o := range back {
		if got, _, _ := unstructured.NestedString(o.Object, "data", "v"); got != v1[o.GetName()] {
			t.Errorf("%s read back with different data", o.GetName())
		}
	}
	// 2.0.0 changes one and drops the rest; rolling back restores them all.
	v2 := map[string]string{"big-0": "small"}
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "2.0.0", Objects: cms(t, ns, v2)}}); err != nil {
		t.Fatal(err)
	}
	if exists(t, cmGVR, ns, "big-1") {
		t.Fatal("2.0.0 did not prune big-1")
	}
	if _, err := d.Rollback(t.Context(), plugin, 1); err != nil {
		t.Fatal(err)
	}
	for name, want := range v1 {
		if got := cmValue(t, ns, name); got != want {
			t.Errorf("%s after the rollback has %d bytes, not its 1.0.0 data", name, len(got))
		}
	}
}

func TestChunksWithoutAHeadAreNeverReadAndCollected(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "torn")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: cms(t, ns, map[string]string{"a": "1"})}}); err != nil {
		t.Fatal(err)
	}
	before := recordSecrets(t, plugin, "chunk")
	// A run killed after writing revision 2's chunks and before its head; and one
	// killed while rewriting revision 1 with other content.
	orphans, err := d.WriteChunksOnly(t.Context(), plugin, 2, cms(t, ns, map[string]string{"a": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	more, err := d.WriteChunksOnly(t.Context(), plugin, 1, cms(t, ns, map[string]string{"a": "torn"}))
	if err != nil {
		t.Fatal(err)
	}
	orphans = append(orphans, more...)
	// Readers see revision 1 whole and nothing of revision 2.
	if got := summary(history(t, d, plugin)); got != "1:Ready:1.0.0" {
		t.Errorf("history with orphaned chunks = %s", got)
	}
	back, err := d.RecordedObjects(t.Context(), plugin, 1)
	if err != nil || len(back) != 1 || back[0].Object["data"].(map[string]any)["v"] != "1" {
		t.Errorf("revision 1 read back as %v (%v)", back, err)
	}
	// The next write converges: revision 2 is recorded, orphans are gone.
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.1.0", Objects: cms(t, ns, map[string]string{"a": "3"})}}); err != nil {
		t.Fatal(err)
	}
	after := recordSecrets(t, plugin, "chunk")
	for _, o := range orphans {
		if slices.Contains(after, o) && !slices.Contains(before, o) {
			t.Errorf("orphaned chunk %s survived the next write", o)
		}
	}
	if got := summary(history(t, d, plugin)); got != "1:Superseded:1.0.0 2:Ready:1.1.0" {
		t.Errorf("history = %s", got)
	}
	if len(after) != 0 {
		t.Errorf("chunks = %v, want none: both revisions are small enough to keep their objects in their heads", after)
	}
	if _, err := d.Rollback(t.Context(), plugin, 1); err != nil || cmValue(t, ns, "a") != "1" {
		t.Errorf("rollback to 1 after the torn writes: %v", err)
	}
}

// legacyInventory writes a ConfigMap inventory as the previous kubeplug did.
func legacyInventory(t testing.TB, plugin string, refs []deploy.ObjRef) {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"plugin": plugin, "version": "0.9.0", "valuesDigest": "sha256:old", "objects": refs, "phase": "Ready"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeplug-inventory-" + plugin, Namespace: "kubeplug-system",
			Labels: map[string]string{state.LabelInventory: "true", deploy.LabelPlugin: plugin}},
		BinaryData: map[string][]byte{"inventory.json.gz": buf.Bytes()},
	}
	if _, err := testcluster.Client(t).CoreV1().ConfigMaps("kubeplug-system").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestConfigMapInventoryIsMigratedAsRevisionOne(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "legacy")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	// The previous kubeplug applied "old" and "kept" and recorded them in a ConfigMap.
	for _, name := range []string{"old", "kept"} {
		cm := cms(t, ns, map[string]string{name: "0"})[0]
		cm.SetLabels(map[string]string{deploy.LabelPlugin: plugin, deploy.LabelManagedBy: "kubeplug"})
		if _, err := dyn(t).Resource(cmGVR).Namespace(ns).Apply(t.Context(), name, cm, metav1.ApplyOptions{FieldManager: deploy.FieldManager}); err != nil {
			t.Fatal(err)
		}
	}
	legacyInventory(t, plugin, []deploy.ObjRef{{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "old"}, {Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "kept"}})
	// Status and history read it before any apply.
	if inv := inventory(t, d, plugin); inv == nil || inv.Version != "0.9.0" || inv.Revision != 1 || len(inv.Objects) != 2 {
		t.Fatalf("the ConfigMap inventory read as %+v", inv)
	}
	// A downgrade below it is refused like any other.
	if err := d.CheckDowngrade(t.Context(), plugin, "0.1.0"); !errors.Is(err, deploy.ErrDowngrade) {
		t.Errorf("downgrade below a migrated version: %v", err)
	}
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: cms(t, ns, map[string]string{"kept": "1"})}}); err != nil {
		t.Fatal(err)
	}
	if exists(t, cmGVR, ns, "old") || cmValue(t, ns, "kept") != "1" {
		t.Error("the apply over a migrated inventory did not prune old or update kept")
	}
	if _, err := testcluster.Client(t).CoreV1().ConfigMaps("kubeplug-system").Get(t.Context(), "kubeplug-inventory-"+plugin, metav1.GetOptions{}); err == nil {
		t.Error("the ConfigMap inventory is still there")
	}
	h := history(t, d, plugin)
	if got := summary(h); got != "1:Superseded:0.9.0 2:Ready:1.0.0" || !strings.Contains(h[0].Description, "migrated") {
		t.Errorf("history = %s (%q)", got, h[0].Description)
	}
	// Revision 1 recorded no objects: no rollback to it, clearly.
	if _, err := d.Rollback(t.Context(), plugin, 1); !errors.Is(err, deploy.ErrNoObjects) {
		t.Errorf("rollback to the migrated revision: %v", err)
	}
}

func TestUninstallFromTheRecordAlone(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin, old := unique(t, "gone"), unique(t, "oldgone")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1.0.0", Objects: cms(t, ns, map[string]string{"g": "1"}),
		Releases: []deploy.HelmRelease{{Name: "web", Namespace: ns, Chart: testChart(t)}}}}); err != nil {
		t.Fatal(err)
	}
	// And a plugin only a ConfigMap inventory of the previous kubeplug knows.
	o := cms(t, ns, map[string]string{"o": "0"})[0]
	if _, err := dyn(t).Resource(cmGVR).Namespace(ns).Apply(t.Context(), "o", o, metav1.ApplyOptions{FieldManager: deploy.FieldManager}); err != nil {
		t.Fatal(err)
	}
	legacyInventory(t, old, []deploy.ObjRef{{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "o"}})
	// A fresh deployer, no package, no catalog: only what the cluster records.
	fresh := newDeployer(t, deploy.Options{Timeout: time.Minute})
	done, err := fresh.Uninstall(t.Context(), []string{plugin, old}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 2 {
		t.Errorf("removed %v", done)
	}
	if exists(t, cmGVR, ns, "g") || exists(t, cmGVR, ns, "o") || exists(t, cmGVR, ns, "web-msg") {
		t.Error("uninstall left objects")
	}
	if rev, _ := revision(t, ns, "web"); rev != 0 {
		t.Errorf("the Helm release is still installed (revision %d)", rev)
	}
	if len(recordSecrets(t, plugin, "head"))+len(recordSecrets(t, plugin, "chunk")) != 0 || inventory(t, d, old) != nil {
		t.Error("uninstall left records")
	}
}

func TestRollbackOfAPluginOfHelmReleasesOnly(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "helmonly")
	chrt := testChart(t)
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	for _, msg := range []string{"one", "two"} {
		u := deploy.Unit{Plugin: plugin, Version: "1.0.0", Releases: []deploy.HelmRelease{{Name: "web", Namespace: ns, Chart: chrt, Values: map[string]any{"message": msg}}}}
		if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{u}); err != nil {
			t.Fatal(err)
		}
	}
	if got := summary(history(t, d, plugin)); got != "1:Superseded:1.0.0 2:Ready:1.0.0" {
		t.Fatalf("history = %s: a change of Helm values only is a new revision", got)
	}
	if _, err := d.Rollback(t.Context(), plugin, 0); err != nil {
		t.Fatal(err)
	}
	if m := message(t, ns, "web-msg"); m != "one" {
		t.Errorf("message after the rollback = %q, want one", m)
	}
	if rev, st := revision(t, ns, "web"); rev != 3 || st != "deployed" {
		t.Errorf("Helm release revision %d %s, want 3 deployed", rev, st)
	}
}
