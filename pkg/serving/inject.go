package serving

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Lookup returns the live Secret namespace/name, or nil when there is none.
type Lookup func(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error)

// Inject fills the serving Secrets and the caBundle fields among objs, reusing
// what the live Secrets hold while it is valid (see the package doc). It returns
// filled copies by index into objs and leaves objs untouched, so that keys never
// reach what the caller records. Objects without kubeplug's serving annotations
// are not looked at.
//
// Its passes: the CA Secrets first (issued or rotated), then the serving
// certificate Secrets signed by them, then the caBundle fields that name them.
func Inject(ctx context.Context, objs []*unstructured.Unstructured, get Lookup, p Policy) (map[int]*unstructured.Unstructured, error) {
	p = p.withDefaults()
	in := &injector{get: get, p: p, now: p.Now(), out: map[int]*unstructured.Unstructured{}, cas: map[string]*ca{}, caSecrets: map[string]*ca{}}
	for _, pass := range []func(context.Context, int, *unstructured.Unstructured) error{in.caSecret, in.certSecret, in.caBundle} {
		for i, o := range objs {
			if err := pass(ctx, i, o); err != nil {
				return nil, err
			}
		}
	}
	return in.out, nil
}

// injector is one Inject: the CAs so far, by Service and by CA Secret, and
// the filled copies by index.
type injector struct {
	get       Lookup
	p         Policy
	now       time.Time
	out       map[int]*unstructured.Unstructured
	cas       map[string]*ca // by Service, namespace/name
	caSecrets map[string]*ca // by CA Secret, namespace/name
}

// servingSecret is the Service o's annotation names when o is a Secret.
func servingSecret(o *unstructured.Unstructured, annotation string) string {
	if o.GetKind() != "Secret" || o.GetAPIVersion() != "v1" {
		return ""
	}
	return o.GetAnnotations()[annotation]
}

// caSecret fills a serving CA Secret, reusing the live CA while it is fresh.
func (in *injector) caSecret(ctx context.Context, i int, o *unstructured.Unstructured) error {
	svc := servingSecret(o, AnnotationCA)
	if svc == "" {
		return nil
	}
	live, err := in.get(ctx, o.GetNamespace(), o.GetName())
	if err != nil {
		return fmt.Errorf("read serving CA Secret %s/%s: %w", o.GetNamespace(), o.GetName(), err)
	}
	var c *ca
	if live != nil {
		c = loadCA(secretData(live, "ca.crt"), secretData(live, "ca.key"), secretData(live, "bundle.crt"), in.now)
	}
	if c == nil || !fresh(c.cert, in.now) {
		if c, err = rotate(c, svc, in.p); err != nil {
			return fmt.Errorf("issue serving CA for Service %s: %w", svc, err)
		}
	}
	in.cas[svc] = c
	in.caSecrets[o.GetNamespace()+"/"+o.GetName()] = c
	in.out[i] = withData(o, map[string][]byte{"ca.crt": c.certPEM, "ca.key": c.keyPEM, "bundle.crt": c.bundle()})
	return nil
}

// certSecret fills a serving certificate Secret, reusing the live one while
// its CA signed it, it names the Service and it is fresh.
func (in *injector) certSecret(ctx context.Context, i int, o *unstructured.Unstructured) error {
	svc := servingSecret(o, AnnotationCert)
	if svc == "" {
		return nil
	}
	c := in.cas[svc]
	if c == nil {
		return fmt.Errorf("serving certificate Secret %s/%s: no serving CA Secret for Service %s among the plugin's objects", o.GetNamespace(), o.GetName(), svc)
	}
	names := DNSNames(svc)
	live, err := in.get(ctx, o.GetNamespace(), o.GetName())
	if err != nil {
		return fmt.Errorf("read serving certificate Secret %s/%s: %w", o.GetNamespace(), o.GetName(), err)
	}
	var crt, key []byte
	if live != nil {
		crt, key = secretData(live, "tls.crt"), secretData(live, "tls.key")
	}
	if live == nil || !c.servingOK(crt, key, names, in.now) {
		if crt, key, err = c.issue(names, in.p); err != nil {
			return fmt.Errorf("issue serving certificate for Service %s: %w", svc, err)
		}
	}
	in.out[i] = withData(o, map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": c.bundle()})
	return nil
}

// caBundle fills the caBundle of an APIService or of each webhook of a
// webhook configuration that names serving CA Secrets of the plugin.
func (in *injector) caBundle(_ context.Context, i int, o *unstructured.Unstructured) error {
	from := o.GetAnnotations()[AnnotationInjectCA]
	if from == "" {
		return nil
	}
	for _, f := range strings.Split(from, ",") {
		if in.caSecrets[f] == nil {
			return fmt.Errorf("%s %s: annotation %s names %s, which is not a serving CA Secret of the plugin", o.GetKind(), o.GetName(), AnnotationInjectCA, f)
		}
	}
	cp := o.DeepCopy()
	switch o.GetKind() {
	case "APIService":
		ns, _, _ := unstructured.NestedString(cp.Object, "spec", "service", "namespace")
		name, _, _ := unstructured.NestedString(cp.Object, "spec", "service", "name")
		c := in.cas[ns+"/"+name]
		if c == nil {
			return fmt.Errorf("APIService %s: no serving CA for its Service %s/%s", o.GetName(), ns, name)
		}
		_ = unstructured.SetNestedField(cp.Object, base64.StdEncoding.EncodeToString(c.bundle()), "spec", "caBundle")
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
		hooks, _, _ := unstructured.NestedSlice(cp.Object, "webhooks")
		for j, h := range hooks {
			m, _ := h.(map[string]any)
			ns, _, _ := unstructured.NestedString(m, "clientConfig", "service", "namespace")
			name, _, _ := unstructured.NestedString(m, "clientConfig", "service", "name")
			c := in.cas[ns+"/"+name]
			if c == nil {
				return fmt.Errorf("%s %s: webhook %d: no serving CA for its Service %s/%s", o.GetKind(), o.GetName(), j, ns, name)
			}
			_ = unstructured.SetNestedField(m, base64.StdEncoding.EncodeToString(c.bundle()), "clientConfig", "caBundle")
		}
		_ = unstructured.SetNestedSlice(cp.Object, hooks, "webhooks")
	default:
		return fmt.Errorf("%s %s: annotation %s is only understood on APIServices and webhook configurations", o.GetKind(), o.GetName(), AnnotationInjectCA)
	}
	in.out[i] = cp
	return nil
}

// DNSNames are the names a Service ("namespace/name") is reached by in the cluster.
func DNSNames(svc string) []string {
	ns, name, _ := strings.Cut(svc, "/")
	return []string{name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local", name + "." + ns, name}
}

func secretData(s *unstructured.Unstructured, key string) []byte {
	v, _, _ := unstructured.NestedString(s.Object, "data", key)
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil
	}
	return b
}

func withData(o *unstructured.Unstructured, data map[string][]byte) *unstructured.Unstructured {
	cp := o.DeepCopy()
	m := map[string]any{}
	for k, v := range data {
		m[k] = base64.StdEncoding.EncodeToString(v)
	}
	_ = unstructured.SetNestedMap(cp.Object, m, "data")
	return cp
}

// RenewAt is when an apply (Inject) renews what a live serving Secret holds:
// two thirds into the lifetime of its certificate — ca.crt of a serving CA
// Secret, tls.crt of a serving certificate Secret. A controller that applies
// again by then keeps every serving certificate and CA bundle current without
// anyone running apply. ok is false for any other Secret; one holding no
// certificate that parses is due now.
func RenewAt(s *unstructured.Unstructured, now time.Time) (at time.Time, ok bool) {
	var key string
	switch a := s.GetAnnotations(); {
	case s.GetKind() != "Secret":
		return time.Time{}, false
	case a[AnnotationCA] != "":
		key = "ca.crt"
	case a[AnnotationCert] != "":
		key = "tls.crt"
	default:
		return time.Time{}, false
	}
	c, err := parseCert(secretData(s, key))
	if err != nil {
		return now, true
	}
	return c.NotAfter.Add(-c.NotAfter.Sub(c.NotBefore) / 3), true
}
