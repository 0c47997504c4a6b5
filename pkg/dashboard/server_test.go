package dashboard

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// offline is a server whose cluster is never reached: what these tests send is
// refused before anything asks the API server.
func offline(t *testing.T) *Server {
	t.Helper()
	s, err := New(Options{Config: &action.Config{}, Target: action.KubeconfigTarget{RESTConfig: &rest.Config{Host: "http://127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRefusals(t *testing.T) {
	s := offline(t)
	form := url.Values{"revision": {"1"}, "confirm": {"yes"}, "token": {s.token}}
	for _, tc := range []struct {
		name   string
		req    func() *http.Request
		status int
		body   string
	}{
		{"another host name (DNS rebinding)", func() *http.Request {
			r := httptest.NewRequest("GET", "http://evil.example/", nil)
			return r
		}, http.StatusMisdirectedRequest, "only on its loopback address"},
		{"a rollback without the form token", func() *http.Request {
			f := url.Values{"revision": {"1"}, "confirm": {"yes"}}
			r := httptest.NewRequest("POST", "http://127.0.0.1:8484/plugins/hello/rollback", strings.NewReader(f.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, http.StatusForbidden, "token is missing or stale"},
		{"a rollback posted by another site", func() *http.Request {
			r := httptest.NewRequest("POST", "http://127.0.0.1:8484/plugins/hello/rollback", strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			return r
		}, http.StatusForbidden, "refused: a cross-site request"},
		{"a rollback from another origin", func() *http.Request {
			r := httptest.NewRequest("POST", "http://127.0.0.1:8484/plugins/hello/rollback", strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set("Origin", "http://evil.example")
			return r
		}, http.StatusForbidden, "refused: a request from http://evil.example"},
		{"a rollback without the confirmation", func() *http.Request {
			f := url.Values{"revision": {"1"}, "token": {s.token}}
			r := httptest.NewRequest("POST", "http://localhost:8484/plugins/hello/rollback", strings.NewReader(f.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, http.StatusBadRequest, "needs a revision and the confirmation"},
		{"a rollback by GET", func() *http.Request {
			return httptest.NewRequest("GET", "http://127.0.0.1:8484/plugins/hello/rollback?revision=x", nil)
		}, http.StatusBadRequest, "invalid revision &#34;x&#34;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, tc.req())
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("status %d, body:\n%s\nwant %d saying %q", w.Code, w.Body, tc.status, tc.body)
			}
			if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
		})
	}
}

// TestStaticOffline: the pages load htmx from the dashboard itself, never from
// another host, and the vendored copy is the version the Makefile pins.
func TestStaticOffline(t *testing.T) {
	s := offline(t)
	for _, p := range []string{"/static/htmx.min.js", "/static/htmx-ext-sse.min.js", "/static/style.css"} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1:8484"+p, nil))
		if w.Code != http.StatusOK || w.Body.Len() == 0 {
			t.Errorf("%s: %d", p, w.Code)
		}
	}
	layout, err := templateFS.ReadFile("templates/layout.html")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(src|href)="(https?:)?//`).Find(layout); m != nil {
		t.Errorf("the layout loads something from another host: %s", m)
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	pin := regexp.MustCompile(`(?m)^HTMX_VERSION := (\S+)$`).FindSubmatch(mk)
	js, err := staticFS.ReadFile("static/htmx.min.js")
	if err != nil || pin == nil {
		t.Fatalf("%v; pin %q", err, pin)
	}
	if !strings.Contains(string(js), `version:"`+string(pin[1])+`"`) {
		t.Errorf("static/htmx.min.js is not htmx %s (make vendor-htmx)", pin[1])
	}
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:8484": true, "localhost:1": true, "[::1]:80": true, "127.1.2.3": true, "LOCALHOST": true,
		"evil.example:8484": false, "10.0.0.1:80": false, "localhost.evil.example": false, "": false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestContrast keeps every text colour of the stylesheet at WCAG AA contrast
// (4.5:1) on the background it is drawn on.
func TestContrast(t *testing.T) {
	css, err := staticFS.ReadFile("static/style.css")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`--(\w+): (#[0-9a-f]{6})`).FindAllStringSubmatch(string(css), -1) {
		vars[m[1]] = m[2]
	}
	for _, tc := range []struct{ fg, bg string }{
		{vars["fg"], "#ffffff"}, {vars["muted"], "#ffffff"}, {vars["accent"], "#ffffff"}, {vars["accent"], "#eef3fb"},
		{vars["bad"], "#ffffff"}, {vars["bad"], "#fdf0f0"}, {vars["good"], "#ffffff"}, {vars["good"], "#eefaf1"},
		{vars["warn"], "#ffffff"}, {"#ffffff", "#0f2747"}, {"#ffffff", vars["accent"]}, {vars["fg"], "#fff6dd"},
	} {
		if tc.fg == "" {
			t.Fatalf("a colour variable is missing from style.css: %v", vars)
		}
		if r := contrast(tc.fg, tc.bg); r < 4.5 {
			t.Errorf("%s on %s: contrast %.2f, want at least 4.5", tc.fg, tc.bg, r)
		}
	}
}

func contrast(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// luminance is the WCAG relative luminance of #rrggbb.
func luminance(hex string) float64 {
	var rgb [3]float64
	for i := range rgb {
		var v int
		_, _ = fmt.Sscanf(hex[1+2*i:3+2*i], "%02x", &v)
		c := float64(v) / 255
		if c <= 0.03928 {
			rgb[i] = c / 12.92
		} else {
			rgb[i] = math.Pow((c+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*rgb[0] + 0.7152*rgb[1] + 0.0722*rgb[2]
}

// TestOptions: a dashboard that answers any host must be read-only, and a
// read-only one has no rollback; its base path is kept in its pages.
func TestOptions(t *testing.T) {
	target := action.KubeconfigTarget{RESTConfig: &rest.Config{Host: "http://127.0.0.1:1"}}
	if _, err := New(Options{Config: &action.Config{}, Target: target, Remote: true}); err == nil || !strings.Contains(err.Error(), "must be ReadOnly") {
		t.Errorf("a Remote dashboard that may act: %v", err)
	}
	if _, err := New(Options{Config: &action.Config{}, Target: target, Base: "/dashboard"}); err == nil {
		t.Error("a Base without its trailing slash was taken")
	}
	s, err := New(Options{Config: &action.Config{}, Target: target, Base: "/dashboard/", ReadOnly: true, Remote: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/dashboard/plugins/hello/rollback?revision=1", http.StatusForbidden},
		{"POST", "/dashboard/plugins/hello/rollback", http.StatusForbidden},
		{"GET", "/dashboard/static/style.css", http.StatusOK},
	} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(tc.method, "http://kubeplug-controller.kubeplug-system.svc:8080"+tc.path, nil))
		if w.Code != tc.status {
			t.Errorf("%s %s: %d, want %d\n%s", tc.method, tc.path, w.Code, tc.status, w.Body)
		}
	}
}
