package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestMigrateNames: an object stored under the earlier ConfigMap naming is
// found under the current one after the server starts, with its labels; the
// old ConfigMap is gone, and a second run changes nothing.
func TestMigrateNames(t *testing.T) {
	ctx := context.Background()
	r := Resource{Kind: "Widget", Plural: "widgets", Namespaced: true}
	const group, storage = "widgets.example.com", "widgets-system"
	sum := sha256.Sum256([]byte(group + "/" + r.Plural + "/default/w1"))
	old := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: r.Plural + "-" + hex.EncodeToString(sum[:10]), Namespace: storage,
			Labels: map[string]string{labelResource: r.Plural + "." + group, labelNamespace: "default"}},
		Data: map[string]string{dataKeyObject: `{"apiVersion":"widgets.example.com/v1alpha1","kind":"Widget","metadata":{"name":"w1","namespace":"default","labels":{"team":"a"}},"spec":{"size":7}}`},
	}
	client := fake.NewClientset(old)
	s := &store{client: client, namespace: storage, group: group, version: "v1alpha1"}
	for range 2 {
		if err := s.migrateNames(ctx, []Resource{r}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CoreV1().ConfigMaps(storage).Get(ctx, old.Name, metav1.GetOptions{}); err == nil {
		t.Error("the old ConfigMap is still there")
	}
	u, err := s.get(ctx, r, "default", "w1")
	if err != nil {
		t.Fatalf("the object under the current naming: %v", err)
	}
	if u.GetLabels()["team"] != "a" {
		t.Errorf("labels = %v", u.GetLabels())
	}
	cm, err := client.CoreV1().ConfigMaps(storage).Get(ctx, s.cmName(r, "default", "w1"), metav1.GetOptions{})
	if err != nil || cm.Labels["team"] != "a" {
		t.Errorf("the storage ConfigMap's labels (for selectors) = %v, %v", cm.Labels, err)
	}
}
