package aws

import (
	"fmt"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
)

func init() { config.RegisterProviderCheck("aws", checkSpec) }

// checkSpec is the rules of spec.provider.aws beyond its schema, which the
// cluster file's check reports at their line: an existing network is a VPC with
// at least two subnets (the API server's load balancer spans two availability
// zones).
func checkSpec(spec *v1alpha1.ClusterSpec) []config.ProviderProblem {
	return checkProvider(spec.Provider)
}

func checkProvider(p *v1alpha1.Provider) []config.ProviderProblem {
	if p == nil || p.AWS == nil {
		return nil
	}
	a := p.AWS
	switch {
	case (a.VPCID == "") != (len(a.SubnetIDs) == 0):
		return []config.ProviderProblem{{Pointer: "/provider/aws", Message: "expected vpcID and subnetIDs together (an existing VPC) or neither (a new one)"}}
	case a.VPCID != "" && len(a.SubnetIDs) < 2:
		return []config.ProviderProblem{{Pointer: "/provider/aws/subnetIDs", Message: "expected at least two subnets, in different availability zones, for the API server's load balancer"}}
	}
	return nil
}

// specError is checkSpec's first problem as an error, for a provider made from
// a spec that no cluster file's check read (a library user's).
func specError(p *v1alpha1.Provider) error {
	if probs := checkProvider(p); len(probs) > 0 {
		return fmt.Errorf("spec%s: %s", strings.ReplaceAll(probs[0].Pointer, "/", "."), probs[0].Message)
	}
	return nil
}
