package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestFilterAnswersAreStatus: a request the delegated authentication refuses
// is a 401 Status, as from the API server — not a 500 because the server's
// scheme could not encode the Status.
func TestFilterAnswersAreStatus(t *testing.T) {
	client := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "extension-apiserver-authentication", Namespace: "kube-system"},
	})
	srv, err := New(t.Context(), Options{Group: "widgets.example.com", Version: "v1alpha1",
		Resources: []Resource{{Kind: "Widget", Plural: "widgets", Namespaced: true}}, Client: client, Storage: "widgets-system"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/apis/widgets.example.com/v1alpha1/namespaces/default/widgets", nil))
	var st metav1.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != http.StatusUnauthorized || st.Kind != "Status" || st.Code != http.StatusUnauthorized {
		t.Fatalf("unauthenticated request: %d %s (%v)", rec.Code, rec.Body, err)
	}
}
