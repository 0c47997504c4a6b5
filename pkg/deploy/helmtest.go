package deploy

import (
	"context"

	"github.com/kubeplug/kubeplug/pkg/deploy/helm"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
)

// HelmTestResult is what one test hook of a release did (see [Deployer.TestRelease]).
type HelmTestResult = helm.TestResult

// TestRelease runs the test hooks of an installed Helm release as `helm test`
// does, and returns each hook's result; an error when one failed.
func (d *Deployer) TestRelease(ctx context.Context, namespace, name string) ([]HelmTestResult, error) {
	return d.helm.Test(ctx, kube.ReleaseRef{Namespace: namespace, Name: name})
}
