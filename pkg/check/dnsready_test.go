package check_test

import (
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/check"
	"github.com/kubeplug/kubeplug/pkg/provider/local"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// TestDNSReadyWaitsOnlyAsLongAsNeeded runs the local provider's dns-ready
// condition, as up's step cluster-ready does, against the test control
// plane: with no ready endpoint behind kube-dns it fails at its timeout
// (shortened here from 3m), naming the condition and the Service; once an
// endpoint turns ready it passes within a poll of that, not at the timeout.
func TestDNSReadyWaitsOnlyAsLongAsNeeded(t *testing.T) {
	var cond check.Plugin
	for _, c := range local.Steps().Conditions {
		if c.Name == local.ConditionDNSReady {
			cond = check.Plugin{Name: "provider", Checks: []v1alpha1.Check{c.Check}}
		}
	}
	if len(cond.Checks) != 1 || cond.Checks[0].Expression == nil || cond.Checks[0].Expression.Timeout != "3m" {
		t.Fatalf("the local provider's dns-ready condition: %+v", cond)
	}
	short := cond
	short.Checks = []v1alpha1.Check{cond.Checks[0]}
	e := *cond.Checks[0].Expression
	e.Timeout = "2s"
	short.Checks[0].Expression = &e
	res := runner(t).Run(t.Context(), short)
	l := check.Diagnostics(res)
	if len(res) != 1 || res[0].OK || res[0].Duration > 10*time.Second ||
		!strings.Contains(l.String(), `validate check "dns-ready": no ready endpoint behind Service kube-system/kube-dns: the cluster's DNS does not answer`) ||
		!strings.Contains(l.String(), "is false after 2s: EndpointSlice objects in namespace kube-system") {
		t.Fatalf("without an endpoint: %+v\n%s", res, l)
	}

	cs := testcluster.Client(t)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kube-dns-test", Namespace: "kube-system", Labels: map[string]string{"kubernetes.io/service-name": "kube-dns"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.96.0.10"}, Conditions: discoveryv1.EndpointConditions{Ready: new(false)}}},
	}
	created, err := cs.DiscoveryV1().EndpointSlices("kube-system").Create(t.Context(), slice, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.DiscoveryV1().EndpointSlices("kube-system").Delete(t.Context(), slice.Name, metav1.DeleteOptions{})
	})
	const readyAfter = 2 * time.Second
	go func() {
		time.Sleep(readyAfter)
		created.Endpoints[0].Conditions.Ready = new(true)
		if _, err := cs.DiscoveryV1().EndpointSlices("kube-system").Update(t.Context(), created, metav1.UpdateOptions{}); err != nil {
			t.Errorf("make the endpoint ready: %v", err)
		}
	}()
	start := time.Now()
	res = runner(t).Run(t.Context(), cond)
	took := time.Since(start)
	if len(res) != 1 || !res[0].OK {
		t.Fatalf("with an endpoint ready after %s: %+v", readyAfter, res)
	}
	if took < readyAfter || took > readyAfter+5*time.Second {
		t.Errorf("dns-ready passed after %s; the endpoint was ready after %s (its timeout is 3m)", took, readyAfter)
	}
}
