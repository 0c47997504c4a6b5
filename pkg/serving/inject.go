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
func Inject(ctx context.Context, objs []*unstructured.Unstructured, get Lookup, p Policy) (map[int]*unstructured.Unstructured, error) {
	p = p.withDefaults()
	now := p.Now()
	out := map[int]*unstructured.Unstructured{}
	cas := map[string]*ca{}       // by Service, namespace/name
	caSecrets := map[string]*ca{} // by CA Secret, namespace/name
	for i, o := range objs {
		svc := o.GetAnnotations()[AnnotationCA]
		if svc == "" || o.GetKind() != "Secret" || o.GetAPIVersion() != "v1" {
			continue
		}
		live, err := get(ctx, o.GetNamespace(), o.GetName())
		if err != nil {
			return nil, fmt.Errorf("read serving CA Secret %s/%s: %w", o.GetNamespace(), o.GetName(), err)
		}
		var c *ca
		if live != nil {
			c = loadCA(secretData(live, "ca.crt"), secretData(live, "ca.key"), secretData(live, "bundle.crt"), now)
		}
		if c == nil || !fresh(c.cert, now) {
			if c, err = rotate(c, svc, p); err != nil {
				return nil, fmt.Errorf("issue serving CA for Service %s: %w", svc, err)
			}
		}
		cas[svc] = c
		caSecrets[o.GetNamespace()+"/"+o.GetName()] = c
		out[i] = withData(o, map[string][]byte{"ca.crt": c.certPEM, "ca.key": c.keyPEM, "bundle.crt": c.bundle()})
	}
	for i, o := range objs {
		svc := o.GetAnnotations()[AnnotationCert]
		if svc == "" || o.GetKind() != "Secret" || o.GetAPIVersion() != "v1" {
			continue
		}
		c := cas[svc]
		if c == nil {
			return nil, fmt.Errorf("serving certificate Secret %s/%s: no serving CA Secret for Service %s among the plugin's objects", o.GetNamespace(), o.GetName(), svc)
		}
		names := DNSNames(svc)
		live, err := get(ctx, o.GetNamespace(), o.GetName())
		if err != nil {
			return nil, fmt.Errorf("read serving certificate Secret %s/%s: %w", o.GetNamespace(), o.GetName(), err)
		}
		var crt, key []byte
		if live != nil {
			crt, key = secretData(live, "tls.crt"), secretData(live, "tls.key")
		}
		if live == nil || !c.servingOK(crt, key, names, now) {
			if crt, key, err = c.issue(names, p); err != nil {
				return nil, fmt.Errorf("issue serving certificate for Service %s: %w", svc, err)
			}
		}
		out[i] = withData(o, map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": c.bundle()})
	}
	for i, o := range objs {
		from := o.GetAnnotations()[AnnotationInjectCA]
		if from == "" {
			continue
		}
		for _, f := range strings.Split(from, ",") {
			if caSecrets[f] == nil {
				return nil, fmt.Errorf("%s %s: annotation %s names %s, which is not a serving CA Secret of the plugin", o.GetKind(), o.GetName(), AnnotationInjectCA, f)
			}
		}
		cp := o.DeepCopy()
		switch o.GetKind() {
		case "APIService":
			ns, _, _ := unstructured.NestedString(cp.Object, "spec", "service", "namespace")
			name, _, _ := unstructured.NestedString(cp.Object, "spec", "service", "name")
			c := cas[ns+"/"+name]
			if c == nil {
				return nil, fmt.Errorf("APIService %s: no serving CA for its Service %s/%s", o.GetName(), ns, name)
			}
			_ = unstructured.SetNestedField(cp.Object, base64.StdEncoding.EncodeToString(c.bundle()), "spec", "caBundle")
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(cp.Object, "webhooks")
			for j, h := range hooks {
				m, _ := h.(map[string]any)
				ns, _, _ := unstructured.NestedString(m, "clientConfig", "service", "namespace")
				name, _, _ := unstructured.NestedString(m, "clientConfig", "service", "name")
				c := cas[ns+"/"+name]
				if c == nil {
					return nil, fmt.Errorf("%s %s: webhook %d: no serving CA for its Service %s/%s", o.GetKind(), o.GetName(), j, ns, name)
				}
				_ = unstructured.SetNestedField(m, base64.StdEncoding.EncodeToString(c.bundle()), "clientConfig", "caBundle")
			}
			_ = unstructured.SetNestedSlice(cp.Object, hooks, "webhooks")
		default:
			return nil, fmt.Errorf("%s %s: annotation %s is only understood on APIServices and webhook configurations", o.GetKind(), o.GetName(), AnnotationInjectCA)
		}
		out[i] = cp
	}
	return out, nil
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
