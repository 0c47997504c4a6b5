package engine

import (
	"maps"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// ProviderFacts completes a cluster's facts with what only its provider knows
// (the API endpoint, the machines' network, the CNI, the role labels). values
// returns a planned plugin's cluster-level values, nil when the cluster does
// not run it. It must not block: it runs when the plan is made.
type ProviderFacts func(cl *v1alpha1.Cluster, values func(plugin string) map[string]any, f *stage.Facts)

// The built-in plugins whose values are facts.
const (
	controlPlanePlugin = "control-plane"
	clusterDNSPlugin   = "cluster-dns"
)

// facts are the cluster's facts (stage.Facts): the provider's name, the
// Kubernetes version and the pools from the cluster file, the Service and Pod
// ranges and DNS domain from the control-plane plugin's values, the DNS address
// from the cluster-dns plugin's, then Options.Facts for the rest.
func (e *Engine) facts(plan *Plan) *stage.Facts {
	cl := plan.Cluster
	f := &stage.Facts{Pools: map[string]string{}, NodeRoles: map[string]string{}}
	if cl.KubernetesVersion != nil {
		f.KubernetesVersion = cl.KubernetesVersion.String()
	}
	values := func(name string) map[string]any {
		for _, p := range plan.Plugins {
			if p.Package.Name == name && p.Values != nil {
				return maps.Clone(p.Values.Cluster)
			}
		}
		return nil
	}
	str := func(m map[string]any, k string) string {
		s, _ := m[k].(string)
		return s
	}
	cp := values(controlPlanePlugin)
	f.ServiceCIDR, f.PodCIDR, f.DNSDomain = str(cp, "serviceClusterIPRange"), str(cp, "clusterCIDR"), str(cp, "clusterDomain")
	f.DNSIP = str(values(clusterDNSPlugin), "clusterIP")
	if cl.Spec == nil {
		return f
	}
	if name, err := v1alpha1.ProviderName(cl.Spec.Spec.Provider); err == nil {
		f.Provider = name
	}
	f.Pools[model.ControlPlanePool] = model.RoleControlPlane
	for _, p := range cl.Spec.Spec.NodePools {
		f.Pools[p.Name] = p.Role
	}
	if e.opts.Facts != nil {
		e.opts.Facts(cl.Spec, values, f)
	}
	return f
}
