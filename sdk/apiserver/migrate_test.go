package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// TestMigrateStorage: objects an earlier server kept as ConfigMaps — under
// the hashed naming before paging and under the current one — are Secrets of
// SecretType after the server starts, with their labels (for selectors), uid
// and creation time; the ConfigMaps are gone, an update keeps the identity,
// and a second run changes nothing.
func TestMigrateStorage(t *testing.T) {
	ctx := context.Background()
	r := Resource{Kind: "Widget", Plural: "widgets", Namespaced: true}
	const group, storage = "widgets.example.com", "widgets-system"
	s := &store{namespace: storage, group: group, version: "v1alpha1"}
	sum := sha256.Sum256([]byte(group + "/" + r.Plural + "/default/w1"))
	created := metav1.NewTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	cm := func(name, obj, uid string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: storage, UID: types.UID("cm-" + typesUID(uid)), CreationTimestamp: created,
				Labels: map[string]string{labelResource: r.Plural + "." + group, labelNamespace: "default", "team": "a"}},
			Data: map[string]string{dataKeyObject: `{"apiVersion":"widgets.example.com/v1alpha1","kind":"Widget","metadata":{"name":"` + obj + `","namespace":"default","labels":{"team":"a"}},"spec":{"size":7}}`},
		}
	}
	hashed := cm(r.Plural+"-"+hex.EncodeToString(sum[:10]), "w1", "1")
	current := cm(s.cmName(r, "default", "w2"), "w2", "2")
	client := fake.NewClientset(hashed, current)
	s.client = client
	for range 2 {
		if err := s.migrateStorage(ctx, []Resource{r}); err != nil {
			t.Fatal(err)
		}
	}
	for _, old := range []*corev1.ConfigMap{hashed, current} {
		if _, err := client.CoreV1().ConfigMaps(storage).Get(ctx, old.Name, metav1.GetOptions{}); err == nil {
			t.Errorf("ConfigMap %s is still there", old.Name)
		}
	}
	for i, name := range []string{"w1", "w2"} {
		u, err := s.get(ctx, r, "default", name)
		if err != nil {
			t.Fatalf("%s after the move: %v", name, err)
		}
		if want := "cm-" + typesUID(string(rune('1'+i))); string(u.GetUID()) != want || !u.GetCreationTimestamp().Time.Equal(created.Time) {
			t.Errorf("%s: uid %s, created %v; want the ConfigMap's %s, %v", name, u.GetUID(), u.GetCreationTimestamp(), want, created)
		}
		sec, err := client.CoreV1().Secrets(storage).Get(ctx, s.cmName(r, "default", name), metav1.GetOptions{})
		if err != nil || sec.Type != SecretType || sec.Labels["team"] != "a" {
			t.Fatalf("the storage Secret of %s: %v", name, err)
		}
		// An update (through the handler, which keeps the stored identity)
		// keeps uid and creation time.
		u.Object["spec"] = map[string]any{"size": int64(8)}
		if _, err := s.update(ctx, r, u); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.get(ctx, r, "default", name); got.GetUID() != u.GetUID() {
			t.Errorf("%s: uid after an update %s, want %s", name, got.GetUID(), u.GetUID())
		}
	}
}

func typesUID(s string) string { return "uid-" + s }
