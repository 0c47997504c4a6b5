package deploy_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// requestLog records the API requests of the clients whose transport it wraps,
// as "VERB path" ("LIST-META path" for a LIST of metadata only).
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		verb := r.Method
		if strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata") {
			verb += "-META"
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, verb+" "+r.URL.Path)
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// take returns the requests logged since the last take that match pred.
func (l *requestLog) take(pred func(string) bool) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.reqs {
		if pred(r) {
			out = append(out, r)
		}
	}
	l.reqs = nil
	return out
}

// TestNoopReadsMetadataOnlyAndDriftIsStillCorrected: a re-apply with nothing
// changed lists only the metadata of the plugin's objects (one LIST per
// resource and namespace), reads, applies and writes nothing; an edit by
// another field manager and a deletion are found and corrected, and recorded,
// so that the next re-apply is a no-op again; a record without resourceVersions
// (an older kubeplug's) has its objects read in full.
func TestNoopReadsMetadataOnlyAndDriftIsStillCorrected(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "noop")
	var docs []string
	for i := range 12 {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm%d, namespace: NS}\ndata: {v: %q}\n", i, fmt.Sprint(i)))
	}
	docs = append(docs, "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: NS}\ndata: {password: c3dvcmRmaXNo}\n")
	unit := func() deploy.Unit {
		return deploy.Unit{Plugin: plugin, Version: "1.0.0", Objects: objs(t, ns, strings.Join(docs, "---\n"))}
	}
	log := &requestLog{}
	cfg := testcluster.RESTConfig(t)
	cfg.WrapTransport = log.wrap
	// Each apply is a run of its own, as the CLI's: a new Deployer. It takes
	// back fields another manager took, as --force-conflicts does.
	apply := func() {
		t.Helper()
		d, err := deploy.New(cfg, deploy.Options{Logger: testcluster.Logger(t), Timeout: time.Minute, ForceConflicts: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{unit()}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = newDeployer(t, deploy.Options{}).Uninstall(t.Context(), []string{plugin}, true) })
	apply()
	rec := inventory(t, newDeployer(t, deploy.Options{}), plugin)
	if rec == nil || len(rec.ResourceVersions) != 13 {
		t.Fatalf("record after the first apply: %+v, want 13 resourceVersions", rec)
	}
	inNS := func(r string) bool { return strings.Contains(r, "/namespaces/"+ns+"/") }
	// Making sure the records' namespace exists (a create) is no write: a CLI
	// run's lease has made sure of it already.
	writes := func(r string) bool { return !strings.HasPrefix(r, "GET") && r != "POST /api/v1/namespaces" }
	log.take(func(string) bool { return false })

	apply()
	all := log.take(func(string) bool { return true })
	objects := slices.DeleteFunc(slices.Clone(all), func(r string) bool { return !inNS(r) })
	slices.Sort(objects)
	want := []string{"GET-META /api/v1/namespaces/" + ns + "/configmaps", "GET-META /api/v1/namespaces/" + ns + "/secrets"}
	if !slices.Equal(objects, want) {
		t.Errorf("requests for the plugin's objects in a no-op: %v, want one metadata LIST per resource: %v", objects, want)
	}
	if w := slices.DeleteFunc(all, func(r string) bool { return !writes(r) }); len(w) > 0 {
		t.Errorf("a no-op wrote: %v", w)
	}

	// Another field manager edits one object, and one is deleted.
	handEdit(t, ns, "cm3")
	core := testcluster.Client(t).CoreV1()
	if err := core.ConfigMaps(ns).Delete(t.Context(), "cm7", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	log.take(func(string) bool { return false })
	apply()
	objects = log.take(inNS)
	slices.Sort(objects)
	want = []string{
		"GET /api/v1/namespaces/" + ns + "/configmaps/cm3",
		"GET-META /api/v1/namespaces/" + ns + "/configmaps", "GET-META /api/v1/namespaces/" + ns + "/secrets",
		"PATCH-META /api/v1/namespaces/" + ns + "/configmaps/cm3", "PATCH-META /api/v1/namespaces/" + ns + "/configmaps/cm7",
	}
	if !slices.Equal(objects, want) {
		t.Errorf("requests for the plugin's objects after an edit and a deletion: %v, want %v", objects, want)
	}
	for name, v := range map[string]string{"cm3": "3", "cm7": "7"} {
		if got := cmValue(t, ns, name); got != v {
			t.Errorf("%s after the re-apply: %q, want %q", name, got, v)
		}
	}
	apply()
	if objects := log.take(inNS); len(objects) != 2 {
		t.Errorf("the re-apply after the correction: %v, want a no-op (two metadata LISTs)", objects)
	}

	// A record without resourceVersions: every object is read in full, and the
	// resourceVersions are recorded again.
	if err := newDeployer(t, deploy.Options{}).ForgetResourceVersions(t.Context(), plugin); err != nil {
		t.Fatal(err)
	}
	log.take(func(string) bool { return false })
	apply()
	objects = log.take(inNS)
	slices.Sort(objects)
	want = []string{"GET /api/v1/namespaces/" + ns + "/configmaps", "GET /api/v1/namespaces/" + ns + "/secrets"}
	if !slices.Equal(objects, want) {
		t.Errorf("requests for an older record's objects: %v, want one full LIST per resource: %v", objects, want)
	}
	if rec := inventory(t, newDeployer(t, deploy.Options{}), plugin); len(rec.ResourceVersions) != 13 {
		t.Errorf("resourceVersions recorded again: %d, want 13", len(rec.ResourceVersions))
	}
}

// TestNoopOfManyPluginsSharesOneList: a re-apply of several plugins whose
// objects share a namespace lists them with one metadata LIST beyond the first
// plugin's own, not one per plugin; an edit by another field manager to an
// object of a plugin the shared LIST answered for is still found and corrected.
func TestNoopOfManyPluginsSharesOneList(t *testing.T) {
	ns := testcluster.Namespace(t)
	var plugins []string
	for i := range 5 {
		plugins = append(plugins, unique(t, fmt.Sprintf("shared%d", i)))
	}
	units := func() []deploy.Unit {
		var out []deploy.Unit
		for i, p := range plugins {
			var docs []string
			for j := range 3 {
				docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p%d-cm%d, namespace: NS}\ndata: {v: %q}\n", i, j, fmt.Sprint(j)))
			}
			out = append(out, deploy.Unit{Plugin: p, Version: "1.0.0", Objects: objs(t, ns, strings.Join(docs, "---\n"))})
		}
		return out
	}
	log := &requestLog{}
	cfg := testcluster.RESTConfig(t)
	cfg.WrapTransport = log.wrap
	apply := func() {
		t.Helper()
		d, err := deploy.New(cfg, deploy.Options{Logger: testcluster.Logger(t), Timeout: time.Minute, ForceConflicts: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.ApplyWave(t.Context(), 0, units()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = newDeployer(t, deploy.Options{}).Uninstall(t.Context(), plugins, true) })
	apply()
	inNS := func(r string) bool { return strings.Contains(r, "/namespaces/"+ns+"/") }
	log.take(func(string) bool { return false })

	apply()
	objects := log.take(inNS)
	lists := slices.DeleteFunc(slices.Clone(objects), func(r string) bool { return r != "GET-META /api/v1/namespaces/"+ns+"/configmaps" })
	if len(lists) != 2 || len(objects) != 2 {
		t.Errorf("requests for 5 plugins' objects in a no-op: %v, want two metadata LISTs (the first plugin's, then every plugin's)", objects)
	}

	handEdit(t, ns, "p4-cm1")
	apply()
	if got := cmValue(t, ns, "p4-cm1"); got != "1" {
		t.Errorf("p4-cm1 after the re-apply: %q, want the plugin's %q back", got, "1")
	}

	// One Deployer applying twice: the second apply does not trust what the
	// first one's shared LIST said.
	d, err := deploy.New(cfg, deploy.Options{Logger: testcluster.Logger(t), Timeout: time.Minute, ForceConflicts: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ApplyWave(t.Context(), 0, units()); err != nil {
		t.Fatal(err)
	}
	handEdit(t, ns, "p3-cm2")
	if _, err := d.ApplyWave(t.Context(), 0, units()); err != nil {
		t.Fatal(err)
	}
	if got := cmValue(t, ns, "p3-cm2"); got != "2" {
		t.Errorf("p3-cm2 after the same Deployer's second apply: %q, want the plugin's %q back", got, "2")
	}
}

// handEdit sets data.v of ConfigMap ns/name to "edited", as another field
// manager would.
func handEdit(t *testing.T, ns, name string) {
	t.Helper()
	cms := testcluster.Client(t).CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["v"] = "edited"
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "hand-edit"}); err != nil {
		t.Fatal(err)
	}
}
