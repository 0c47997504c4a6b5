package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const deployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","labels":{"app":"web"}},
"spec":{"replicas":20,"futureField":{"a":1},"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}},"unknownTop":true}`

func review(op admissionv1.Operation, object, old string) string {
	req := admissionv1.AdmissionRequest{UID: "u-1", Operation: op, Name: "web", Namespace: "shop",
		Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}}
	if object != "" {
		req.Object = runtime.RawExtension{Raw: []byte(object)}
	}
	if old != "" {
		req.OldObject = runtime.RawExtension{Raw: []byte(old)}
	}
	b, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
	return string(b)
}

var (
	maxReplicas = Validate(func(_ context.Context, req Request[appsv1.Deployment]) error {
		if r := req.Object.Spec.Replicas; r != nil && *r > 10 {
			return field.Invalid(field.NewPath("spec", "replicas"), *r, "at most 10")
		}
		return nil
	})
	team = Mutate(func(_ context.Context, req Request[appsv1.Deployment]) error {
		if req.Object == nil {
			return nil
		}
		if req.Object.Labels["team"] == "" {
			req.Object.Labels["team"] = "unassigned"
		}
		return nil
	})
)

func TestHandler(t *testing.T) {
	for _, tc := range []struct {
		name string
		hook Hook
		body string
		// want: HTTP code; for 200, allowed, the result's code and message
		// part, and the object after the patch (a part of its JSON).
		code                int
		allowed             bool
		resultCode          int32
		message, patchedHas string
		patchedLacks        string
	}{
		{name: "validate admits", hook: maxReplicas, body: review(admissionv1.Create, strings.Replace(deployment, `"replicas":20`, `"replicas":2`, 1), ""), code: 200, allowed: true},
		{name: "validate denies naming the field", hook: maxReplicas, body: review(admissionv1.Create, deployment, ""), code: 200,
			resultCode: 403, message: "spec.replicas: Invalid value: 20: at most 10"},
		{name: "an API status keeps its code", hook: Validate(func(context.Context, Request[appsv1.Deployment]) error {
			return apierrors.NewBadRequest("no such thing")
		}), body: review(admissionv1.Create, deployment, ""), code: 200, resultCode: 400, message: "no such thing"},
		{name: "a wrapped API status too", hook: Validate(func(context.Context, Request[appsv1.Deployment]) error {
			return errors.Join(errors.New("x"), apierrors.NewConflict(appsv1.Resource("deployments"), "web", errors.New("busy")))
		}), body: review(admissionv1.Create, deployment, ""), code: 200, resultCode: 409, message: "busy"},
		{name: "mutate patches only what changed", hook: team, body: review(admissionv1.Create, deployment, ""), code: 200, allowed: true,
			patchedHas: `"labels":{"app":"web","team":"unassigned"}`},
		{name: "mutate keeps fields its type does not know", hook: team, body: review(admissionv1.Create, deployment, ""), code: 200, allowed: true,
			patchedHas: `"futureField":{"a":1}`},
		{name: "mutate keeps fields its type does not know (top)", hook: team, body: review(admissionv1.Create, deployment, ""), code: 200, allowed: true,
			patchedHas: `"unknownTop":true`},
		{name: "mutate with nothing to change sends no patch", hook: team, body: review(admissionv1.Update, strings.Replace(deployment, `"app":"web"`, `"team":"a"`, 1), deployment), code: 200, allowed: true},
		{name: "mutate on delete", hook: team, body: review(admissionv1.Delete, "", deployment), code: 200, allowed: true},
		{name: "unstructured", hook: Mutate(func(_ context.Context, req Request[unstructured.Unstructured]) error {
			return unstructured.SetNestedField(req.Object.Object, "blue", "spec", "color")
		}), body: review(admissionv1.Create, deployment, ""), code: 200, allowed: true, patchedHas: `"color":"blue"`},
		{name: "an object the type cannot hold", hook: maxReplicas, body: review(admissionv1.Create, `{"spec":"a string"}`, ""), code: 200,
			resultCode: 400, message: "decode the object (Deployment shop/web)"},
		{name: "a hook that panics", hook: Validate(func(context.Context, Request[appsv1.Deployment]) error { panic("boom") }),
			body: review(admissionv1.Create, deployment, ""), code: 500},
		{name: "garbage", hook: maxReplicas, body: "<html>", code: 400},
		{name: "no request", hook: maxReplicas, body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, code: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			rec := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/hook?timeout=5s", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			Handler(tc.hook, slog.New(slog.NewTextHandler(&logs, nil))).ServeHTTP(rec, r)
			if rec.Code != tc.code {
				t.Fatalf("HTTP %d, want %d: %s", rec.Code, tc.code, rec.Body)
			}
			if tc.code != 200 {
				if !strings.Contains(logs.String(), "admission review") {
					t.Errorf("a failed review was not logged: %q", logs.String())
				}
				return
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			resp := out.Response
			if out.Kind != "AdmissionReview" || out.APIVersion != "admission.k8s.io/v1" || resp == nil || resp.UID != "u-1" {
				t.Fatalf("not a response to the review: %s", rec.Body)
			}
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v: %s", resp.Allowed, tc.allowed, rec.Body)
			}
			if tc.resultCode != 0 && (resp.Result == nil || resp.Result.Code != tc.resultCode || !strings.Contains(resp.Result.Message, tc.message)) {
				t.Fatalf("result %+v, want code %d and %q", resp.Result, tc.resultCode, tc.message)
			}
			if tc.patchedHas == "" {
				if resp.Patch != nil {
					t.Fatalf("unexpected patch %s", resp.Patch)
				}
				return
			}
			if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("patch type %v", resp.PatchType)
			}
			p, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatal(err)
			}
			var in admissionv1.AdmissionReview
			_ = json.Unmarshal([]byte(tc.body), &in)
			patched, err := p.Apply(in.Request.Object.Raw)
			if err != nil {
				t.Fatalf("apply %s: %v", resp.Patch, err)
			}
			var compact bytes.Buffer
			_ = json.Compact(&compact, patched)
			if !strings.Contains(compact.String(), tc.patchedHas) {
				t.Fatalf("patched object %s lacks %s (patch %s)", compact.String(), tc.patchedHas, resp.Patch)
			}
		})
	}
}

func TestHandlerRefusesOtherRequests(t *testing.T) {
	for _, tc := range []struct {
		method, contentType string
		code                int
	}{{http.MethodGet, "application/json", 405}, {http.MethodPost, "text/plain", 415}} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(tc.method, "/hook", strings.NewReader(review(admissionv1.Create, deployment, "")))
		r.Header.Set("Content-Type", tc.contentType)
		Handler(maxReplicas, slog.New(slog.NewTextHandler(io.Discard, nil))).ServeHTTP(rec, r)
		if rec.Code != tc.code {
			t.Errorf("%s %s: HTTP %d, want %d", tc.method, tc.contentType, rec.Code, tc.code)
		}
	}
}

// TestHandlerTimeout: the hook's context ends at the timeout the API server
// sends, the webhook's timeoutSeconds.
func TestHandlerTimeout(t *testing.T) {
	var left time.Duration
	h := Validate(func(ctx context.Context, _ Request[appsv1.Deployment]) error {
		d, _ := ctx.Deadline()
		left = time.Until(d)
		return nil
	})
	r := httptest.NewRequest(http.MethodPost, "/hook?timeout=3s", strings.NewReader(review(admissionv1.Create, deployment, "")))
	r.Header.Set("Content-Type", "application/json")
	Handler(h, slog.New(slog.NewTextHandler(io.Discard, nil))).ServeHTTP(httptest.NewRecorder(), r)
	if left <= 0 || left > 3*time.Second {
		t.Fatalf("time left in the hook's context: %s, want at most 3s", left)
	}
}

func TestNewChecksOptions(t *testing.T) {
	ok := Options{CertFile: "c", KeyFile: "k", Hooks: map[string]Hook{"/v": maxReplicas}}
	for name, mod := range map[string]func(o *Options){
		"no certificate": func(o *Options) { o.CertFile = "" },
		"no hooks":       func(o *Options) { o.Hooks = nil },
		"relative path":  func(o *Options) { o.Hooks = map[string]Hook{"v": maxReplicas} },
		"health path":    func(o *Options) { o.Hooks = map[string]Hook{"/healthz": maxReplicas} },
		"nil hook":       func(o *Options) { o.Hooks = map[string]Hook{"/v": nil} },
	} {
		o := ok
		mod(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := New(ok); err != nil {
		t.Fatal(err)
	}
}
