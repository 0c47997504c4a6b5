package aws

import (
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// TestSpecRulesHoldWithoutAClusterFile: the rules the cluster file's check
// reports at their line (registered with config) also refuse a provider made
// from a spec no cluster file's check read.
func TestSpecRulesHoldWithoutAClusterFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec v1alpha1.AWSProvider
		want string
	}{
		{"vpc without subnets", v1alpha1.AWSProvider{VPCID: "vpc-0123"}, "spec.provider.aws: expected vpcID and subnetIDs together"},
		{"one subnet", v1alpha1.AWSProvider{VPCID: "vpc-0123", SubnetIDs: []string{"subnet-0a"}}, "spec.provider.aws.subnetIDs: expected at least two subnets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newProvider(provider.Config{ClusterName: "c", StateDir: t.TempDir(), Spec: &v1alpha1.Provider{AWS: &tc.spec}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := newProvider(provider.Config{ClusterName: "c", StateDir: t.TempDir(), Spec: &v1alpha1.Provider{AWS: &v1alpha1.AWSProvider{Bucket: "kubeplug-test"}}}); err != nil {
		t.Fatalf("a new network: %v", err)
	}
}
