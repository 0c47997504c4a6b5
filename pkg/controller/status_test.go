package controller

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
)

// TestStatusPatcher: the deferred status write sends what changed of the
// status only — a field set back to empty is removed, not left as it was —
// nothing when nothing changed, and nothing for an object that is gone.
func TestStatusPatcher(t *testing.T) {
	s := runtime.NewScheme()
	if err := ctrlv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	obj := &ctrlv1.PluginInstallation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Generation: 2},
		Spec:       ctrlv1.PluginInstallationSpec{Plugins: []ctrlv1.InstalledPlugin{{Name: "p"}}},
		Status: ctrlv1.PluginInstallationStatus{
			LastAppliedDigest: "sha256:old",
			Plugins:           []ctrlv1.PluginState{{Name: "p", Version: "1.0.0"}},
		},
	}
	var patches []string
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(obj).WithStatusSubresource(obj).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			raw, _ := p.Data(o)
			patches = append(patches, string(raw))
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		}}).Build()
	ctx := t.Context()
	read := func() *ctrlv1.PluginInstallation {
		got := &ctrlv1.PluginInstallation{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	got := read()
	p := newStatusPatcher(c, got)
	if err := p.finish(ctx, got, nil); err != nil || len(patches) != 0 {
		t.Fatalf("nothing changed: err %v, patches %q", err, patches)
	}

	got.Status.LastAppliedDigest = ""
	got.Status.Plugins = nil
	ready(&got.Status.Conditions, got.Generation, ReasonSucceeded, "installed")
	if err := p.patch(ctx, got); err != nil {
		t.Fatal(err)
	}
	if len(patches) != 1 || patches[0] != `{"status":{"conditions":[{"lastTransitionTime":"`+got.Status.Conditions[0].LastTransitionTime.UTC().Format("2006-01-02T15:04:05Z")+`","message":"installed","observedGeneration":2,"reason":"Succeeded","status":"True","type":"Ready"}],"lastAppliedDigest":null,"plugins":null}}` {
		t.Fatalf("patches %q", patches)
	}
	after := read()
	if after.Status.LastAppliedDigest != "" || after.Status.Plugins != nil || !meta.IsStatusConditionTrue(after.Status.Conditions, "Ready") {
		t.Fatalf("status after the patch: %+v", after.Status)
	}
	if err := p.finish(ctx, got, nil); err != nil || len(patches) != 1 {
		t.Fatalf("written already: err %v, patches %q", err, patches)
	}

	got.Status.KubernetesVersion = "1.36.0"
	if err := p.finish(ctx, got, errGone); err != nil || len(patches) != 1 {
		t.Fatalf("gone: err %v, patches %q", err, patches)
	}
	want := errors.New("apply failed")
	if err := p.finish(ctx, got, want); !errors.Is(err, want) || len(patches) != 2 || read().Status.KubernetesVersion != "1.36.0" {
		t.Fatalf("a failed reconcile's status: err %v, patches %q", err, patches)
	}
}
