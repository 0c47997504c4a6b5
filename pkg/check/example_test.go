package check_test

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/check"
)

// Run a plugin's checks against the cluster of the default kubeconfig, and turn
// the failures into diagnostics.
func ExampleRunner_Run() {
	cfg, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := check.New(cfg, check.Options{Cluster: "dev"})
	if err != nil {
		fmt.Println(err)
		return
	}
	results := r.Run(context.Background(), check.Plugin{
		Name: "metrics-server",
		Checks: []v1alpha1.Check{
			{Wait: &v1alpha1.ObjectWait{ObjectRef: v1alpha1.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "kube-system", Name: "metrics-server"}}},
			{Name: "api-available", Expression: &v1alpha1.ExpressionCheck{
				ObjectRef:  v1alpha1.ObjectRef{APIVersion: "apiregistration.k8s.io/v1", Kind: "APIService", Name: "v1beta1.metrics.k8s.io"},
				Expression: `object.status.conditions.exists(c, c.type == "Available" && c.status == "True")`,
			}},
		},
	})
	for _, res := range results {
		fmt.Println(res.Name, res.OK, res.Duration)
	}
	if l := check.Diagnostics(results); l.HasFatal() {
		fmt.Println(l)
	}
}
