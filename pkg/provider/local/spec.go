package local

import (
	"fmt"
	"strconv"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
)

func init() { config.RegisterProviderCheck(Name, checkSpec) }

// checkSpec refuses what the local provider would not honour: its pools are a
// fixed count of nodes or machines, so a pool's autoscaling bounds (minSize,
// maxSize) other than its count are refused rather than ignored.
func checkSpec(spec *v1alpha1.ClusterSpec) []config.ProviderProblem {
	var out []config.ProviderProblem
	for i, p := range spec.NodePools {
		for _, b := range []struct {
			field string
			v     *int
		}{{"minSize", p.MinSize}, {"maxSize", p.MaxSize}} {
			field, v := b.field, b.v
			if v != nil && *v != p.Count {
				out = append(out, config.ProviderProblem{
					Pointer: "/nodePools/" + strconv.Itoa(i) + "/" + field,
					Message: fmt.Sprintf("the local provider runs a fixed %d machines in pool %s and does not scale it: %s is honoured by a provider with autoscaling groups (aws); remove it or set it to count", p.Count, p.Name, field),
				})
			}
		}
	}
	return out
}
