package local

import (
	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// The local provider's pools are a fixed count of nodes or machines.
func init() {
	config.RegisterProviderCheck(Name, func(spec *v1alpha1.ClusterSpec) []config.ProviderProblem {
		return provider.FixedPools(Name, spec)
	})
}
