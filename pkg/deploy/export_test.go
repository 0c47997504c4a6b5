package deploy

import "helm.sh/helm/v4/pkg/action"

// HelmConfig exposes the Helm configuration to tests that forge release records.
func (d *Deployer) HelmConfig(namespace string) (*action.Configuration, error) {
	return d.helm.Config(namespace)
}
