package k8sversions_test

import (
	"testing"

	"github.com/kubeplug/kubeplug/internal/k8sversions"
)

func TestServedAPI(t *testing.T) {
	if _, err := k8sversions.APIs(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version, apiVersion, kind string
		want                      k8sversions.APIStatus
		msg                       string
	}{
		{"1.37.1", "policy/v1beta1", "PodSecurityPolicy", k8sversions.Removed, "not served by Kubernetes 1.37.1 (removed in 1.25): use Pod Security Admission (pod-security.kubernetes.io/* namespace labels)"},
		{"1.24.0", "policy/v1beta1", "PodDisruptionBudget", k8sversions.Deprecated, "deprecated since Kubernetes 1.21 and not served from 1.25: use policy/v1"},
		{"1.20.0", "policy/v1beta1", "PodDisruptionBudget", k8sversions.Served, ""},
		{"v1.37", "extensions/v1beta1", "Ingress", k8sversions.Removed, "not served by Kubernetes 1.37 (removed in 1.22): use networking.k8s.io/v1"},
		{"1.37.1", "v1", "Endpoints", k8sversions.Deprecated, "deprecated since Kubernetes 1.33: use discovery.k8s.io/v1 EndpointSlice"},
		{"1.37.1", "policy/v1", "PodDisruptionBudget", k8sversions.Served, ""},
		{"latest", "extensions/v1beta1", "Ingress", k8sversions.Served, ""},
	} {
		a, st := k8sversions.ServedAPI(tc.version, tc.apiVersion, tc.kind)
		if st != tc.want {
			t.Errorf("%s %s %s: status %d, want %d", tc.version, tc.apiVersion, tc.kind, st, tc.want)
			continue
		}
		if st == k8sversions.Served {
			continue
		}
		if got := a.Message(tc.version, st); got != tc.msg {
			t.Errorf("%s %s %s:\ngot  %s\nwant %s", tc.version, tc.apiVersion, tc.kind, got, tc.msg)
		}
	}
}
