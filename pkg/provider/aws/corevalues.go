package aws

import (
	"encoding/json"
	"fmt"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/plugins"
)

// CloudPlugin is the built-in plugin (plugins/cloud) whose values the template
// is built from: the network's ranges, the instance types and every pool's
// named parts. Its plugin.yaml is the one place their defaults are written.
const CloudPlugin = "cloud"

// coreValues are the built-in cloud plugin's values as the template reads them.
type coreValues struct {
	VPCCIDR                  string `json:"vpcCIDR"`
	APIServerCIDR            string `json:"apiServerCIDR"`
	InstanceType             string `json:"instanceType"`
	ControlPlaneInstanceType string `json:"controlPlaneInstanceType"`
	// LaunchTemplate are LaunchTemplateData properties of every pool, by name.
	LaunchTemplate map[string]any `json:"launchTemplate"`
	// IAM are statements by role, then by name.
	IAM map[string]map[string]any `json:"iam"`
	// Tags of every pool's Auto Scaling group.
	Tags map[string]string `json:"tags"`
}

// builtinDefaults are the defaults in plugins/cloud/plugin.yaml, read once.
var builtinDefaults = sync.OnceValues(func() (map[string]any, error) {
	b, err := plugins.FS.ReadFile(CloudPlugin + "/plugin.yaml")
	if err != nil {
		return nil, err
	}
	var p v1alpha1.Plugin
	if err := yaml.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("plugins/%s/plugin.yaml: %w", CloudPlugin, err)
	}
	if p.Spec.Values == nil {
		return nil, fmt.Errorf("plugins/%s/plugin.yaml has no values", CloudPlugin)
	}
	return p.Spec.Values.Defaults, nil
})

// decodeCoreValues reads the cloud plugin's values: the cluster's when it
// enables the plugin (already merged over the defaults and checked against its
// schema), else the plugin's defaults.
func decodeCoreValues(v map[string]any) (coreValues, error) {
	if v == nil {
		d, err := builtinDefaults()
		if err != nil {
			return coreValues{}, fmt.Errorf("the built-in %s plugin's defaults: %w", CloudPlugin, err)
		}
		v = d
	}
	b, err := json.Marshal(v)
	if err != nil {
		return coreValues{}, err
	}
	var out coreValues
	if err := json.Unmarshal(b, &out); err != nil {
		return coreValues{}, fmt.Errorf("the %s plugin's values: %w", CloudPlugin, err)
	}
	return out, nil
}
