// Package podnet is the Pod network of a cluster's real nodes, the same for
// every provider that runs kubelets: a node's Pod subnet by its ordinal, and
// the CNI configuration (a bridge with IP masquerade, and portmap) a machine's
// kubelet runs Pods with. It lives under pkg/provider/internal because only
// providers use it, and no provider may import another (test/archtest:
// TestProvidersImportNoOtherProvider).
package podnet

import (
	"fmt"
	"strings"
)

// PodCIDR is the Pod subnet of the real node with ordinal i: a /24 from the top
// half of clusterCIDR (a /16), so that it never meets the addresses kwok gives
// simulated Pods from the bottom.
func PodCIDR(clusterCIDR string, i int) string {
	parts := strings.SplitN(strings.SplitN(clusterCIDR, "/", 2)[0], ".", 4)
	if len(parts) != 4 {
		return ""
	}
	return fmt.Sprintf("%s.%s.%d.0/24", parts[0], parts[1], 128+i)
}

// MachineCNIConfig is the CNI configuration of a machine's node (a systemd
// machine or a host over SSH): a bridge on podCIDR with IP masquerade, and
// portmap. A real node's (realnode's writeConfig) is the same but keeps its IPAM data in
// the node's own directory.
func MachineCNIConfig(podCIDR string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "kubeplug",
  "plugins": [
    {
      "type": "bridge", "bridge": "cbr0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, podCIDR)
}
