package controller_test

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestStatusPatcher: the reconcilers' deferred status write sends what changed
// of the status only — a field set back to empty is removed, not left as it
// was — nothing when nothing changed, nothing for an object that is gone, and
// no conflict with a metadata write made since the read.
func TestStatusPatcher(t *testing.T) {
	rc := testcluster.RESTConfig(t)
	installCRDs(t, rc)
	ns := testcluster.Namespace(t)
	s := runtime.NewScheme()
	if err := ctrlv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	kc, err := client.NewWithWatch(rc, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	var patches []string
	c := interceptor.NewClient(kc, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			raw, _ := p.Data(o)
			patches = append(patches, string(raw))
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		},
	})
	ctx := t.Context()
	obj := &ctrlv1.PluginInstallation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"},
		Spec:       ctrlv1.PluginInstallationSpec{Plugins: []ctrlv1.InstalledPlugin{{Name: "p"}}},
	}
	if err := kc.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	obj.Status = ctrlv1.PluginInstallationStatus{LastAppliedDigest: "sha256:old", Plugins: []ctrlv1.PluginState{{Name: "p", Version: "1.0.0"}}}
	if err := kc.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	read := func() *ctrlv1.PluginInstallation {
		got := &ctrlv1.PluginInstallation{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	got := read()
	p := controller.NewStatusPatcher(c, got)
	if err := p.Finish(ctx, got, nil); err != nil || len(patches) != 0 {
		t.Fatalf("nothing changed: err %v, patches %q", err, patches)
	}

	// A metadata write after the read (as the finalizer's): the status patch
	// does not conflict with it, nor undo it.
	fin := got.DeepCopy()
	fin.Finalizers = []string{controller.Finalizer}
	if err := c.Update(ctx, fin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // no controller runs here to remove it: the namespace could not go
		gone := &ctrlv1.PluginInstallation{}
		if kc.Get(context.WithoutCancel(ctx), client.ObjectKeyFromObject(obj), gone) == nil {
			gone.Finalizers = nil
			_ = kc.Update(context.WithoutCancel(ctx), gone)
		}
	})
	got.Status.LastAppliedDigest = ""
	got.Status.Plugins = nil
	controller.SetReady(&got.Status.Conditions, got.Generation, controller.ReasonSucceeded, "installed")
	if err := p.Patch(ctx, got); err != nil {
		t.Fatal(err)
	}
	want := `{"status":{"conditions":[{"lastTransitionTime":"` + got.Status.Conditions[0].LastTransitionTime.UTC().Format("2006-01-02T15:04:05Z") +
		`","message":"installed","observedGeneration":1,"reason":"Succeeded","status":"True","type":"Ready"}],"lastAppliedDigest":null,"plugins":null}}`
	if len(patches) != 1 || patches[0] != want {
		t.Fatalf("patches %q, want one: %s", patches, want)
	}
	after := read()
	if after.Status.LastAppliedDigest != "" || after.Status.Plugins != nil || !isReady(after.Status.Conditions) || len(after.Finalizers) != 1 {
		t.Fatalf("after the patch: finalizers %v, status %+v", after.Finalizers, after.Status)
	}
	if err := p.Finish(ctx, got, nil); err != nil || len(patches) != 1 {
		t.Fatalf("written already: err %v, patches %q", err, patches)
	}

	got.Status.KubernetesVersion = "1.36.0"
	if err := p.Finish(ctx, got, controller.ErrGone); err != nil || len(patches) != 1 {
		t.Fatalf("gone: err %v, patches %q", err, patches)
	}
	failed := errors.New("apply failed")
	if err := p.Finish(ctx, got, failed); !errors.Is(err, failed) || len(patches) != 2 || read().Status.KubernetesVersion != "1.36.0" {
		t.Fatalf("a failed reconcile's status: err %v, patches %q", err, patches)
	}
}

func isReady(conds []metav1.Condition) bool { return meta.IsStatusConditionTrue(conds, "Ready") }
