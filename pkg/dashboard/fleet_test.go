package dashboard

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// TestFleetWithoutCRDs: a cluster without the controller's resources (its API
// server answers 404 for them) has a fleet page that says so, with no
// problem listed.
func TestFleetWithoutCRDs(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"the server could not find the requested resource"}`))
	}))
	defer api.Close()
	s, err := New(Options{Config: &action.Config{}, Target: action.KubeconfigTarget{RESTConfig: &rest.Config{Host: api.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1:8484/fleet", nil))
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, `id="no-fleet"`) || strings.Contains(body, "Problems") {
		t.Errorf("GET /fleet without the CRDs: %d\n%s", w.Code, body)
	}
}

// TestFleetActionRefusals: a fleet action without the form's token, without
// the confirmation, or unknown, is refused before the API server is asked.
func TestFleetActionRefusals(t *testing.T) {
	s := offline(t)
	for _, c := range []struct {
		name, path string
		form       url.Values
		code       int
	}{
		{"no token", "/fleet/ns/web/suspend", url.Values{"confirm": {"yes"}}, http.StatusForbidden},
		{"no confirmation", "/fleet/ns/web/suspend", url.Values{"token": {s.token}}, http.StatusBadRequest},
		{"unknown action", "/fleet/ns/web/delete", url.Values{"token": {s.token}, "confirm": {"yes"}}, http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://127.0.0.1:8484"+c.path, strings.NewReader(c.form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != c.code || !strings.Contains(w.Body.String(), `id="refused"`) {
				t.Errorf("POST %s: %d, want %d\n%s", c.path, w.Code, c.code, w.Body.String())
			}
		})
	}
}
