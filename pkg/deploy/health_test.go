package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

var readyCheck = []deploy.HealthCheck{{Kind: "ConfigMap", Expression: `object.data.ready == "true"`}}

const flagCM = `
apiVersion: v1
kind: ConfigMap
metadata: {name: flag, namespace: NS}
data: {ready: "false"}
`

func TestHealthExpressionHoldsThePluginUntilItIsTrue(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "health")
	d := newDeployer(t, deploy.Options{Timeout: time.Minute})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	start := time.Now()
	go func() {
		time.Sleep(time.Second)
		// Only the test's field manager sets the field, so kubeplug's next apply would
		// conflict with it; for this test the merge patch is what an operator does.
		_, err := dyn(t).Resource(cmGVR).Namespace(ns).Patch(context.Background(), "flag", types.MergePatchType, []byte(`{"data":{"ready":"true"}}`), metav1.PatchOptions{})
		if err != nil {
			t.Error(err)
		}
	}()
	if _, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1", Objects: objs(t, ns, flagCM), Health: readyCheck}}); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("ready after %s, before the expression held", waited)
	}
}

func TestHealthExpressionTimeoutNamesObjectAndExpression(t *testing.T) {
	ns := testcluster.Namespace(t)
	plugin := unique(t, "unhealthy")
	d := newDeployer(t, deploy.Options{Timeout: 2 * time.Second})
	t.Cleanup(func() { _, _ = d.Uninstall(context.WithoutCancel(t.Context()), []string{plugin}, true) })
	_, err := d.ApplyWave(t.Context(), 0, []deploy.Unit{{Plugin: plugin, Version: "1", Objects: objs(t, ns, flagCM), Health: readyCheck}})
	if err == nil {
		t.Fatal("ready although the health expression is false")
	}
	for _, want := range []string{"ConfigMap/" + ns + "/flag", "health expression `object.data.ready == \"true\"` is false"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestHealthExpressionMustCompile(t *testing.T) {
	for _, expr := range []string{`object.data.ready ==`, `"not a bool"`} {
		if _, err := deploy.CompileHealth(expr); err == nil {
			t.Errorf("CompileHealth(%q) succeeded", expr)
		}
	}
	if _, err := deploy.CompileHealth(`object.status.phase == "Ready"`); err != nil {
		t.Error(err)
	}
}
