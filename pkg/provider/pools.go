package provider

import (
	"fmt"
	"strconv"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
)

// FixedPools is the rule of a provider whose pools are a fixed count of
// machines (local, hosts): a pool's autoscaling bounds (minSize, maxSize) other
// than its count are refused, naming the provider, rather than ignored. A
// provider registers it (or calls it from its own check) with
// config.RegisterProviderCheck.
func FixedPools(name string, spec *v1alpha1.ClusterSpec) []config.ProviderProblem {
	var out []config.ProviderProblem
	for i, p := range spec.NodePools {
		for _, b := range []struct {
			field string
			v     *int
		}{{"minSize", p.MinSize}, {"maxSize", p.MaxSize}} {
			if b.v != nil && *b.v != p.Count {
				out = append(out, config.ProviderProblem{
					Pointer: "/nodePools/" + strconv.Itoa(i) + "/" + b.field,
					Message: fmt.Sprintf("the %s provider runs a fixed %d machines in pool %s and does not scale it: %s is honoured by a provider with autoscaling groups (aws); remove it or set it to count", name, p.Count, p.Name, b.field),
				})
			}
		}
	}
	return out
}
