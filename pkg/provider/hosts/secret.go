package hosts

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// ManagementClient is the provider.Option of the controller: the management
// cluster's client, through which the hosts' keySecretRef Secrets are read.
type ManagementClient struct{ Client kubernetes.Interface }

// Provider implements provider.Option.
func (ManagementClient) Provider() string { return Name }

func (ManagementClient) String() string { return "the management cluster's client" }

// secretRefField is the field of the first keySecretRef of spec ("" when it
// has none).
func secretRefField(spec *v1alpha1.HostsProvider) string {
	if spec == nil {
		return ""
	}
	if spec.SSH != nil && spec.SSH.KeySecretRef != nil {
		return field + ".ssh.keySecretRef"
	}
	for i, p := range spec.Pools {
		for j, h := range p.Hosts {
			if h.SSH != nil && h.SSH.KeySecretRef != nil {
				return fmt.Sprintf("%s.pools[%d].hosts[%d].ssh.keySecretRef", field, i, j)
			}
		}
	}
	return ""
}

// secretKeys reads the private key of each host with a keySecretRef from the
// management cluster, once; a missing Secret or key is named with the host.
func (p *Provider) secretKeys(ctx context.Context, hosts []*Host) error {
	for _, h := range hosts {
		r := h.keySecret
		if r == nil || h.key != nil {
			continue
		}
		if p.opts.Management == nil {
			return fmt.Errorf("%s: ssh.keySecretRef: no management cluster to read Secret %s/%s from", label(h), r.Namespace, r.Name)
		}
		sec, err := p.opts.Management.CoreV1().Secrets(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("%s: ssh.keySecretRef: Secret %s/%s: %w", label(h), r.Namespace, r.Name, err)
		}
		b, ok := sec.Data[r.Key]
		if !ok || len(b) == 0 {
			return fmt.Errorf("%s: ssh.keySecretRef: Secret %s/%s has no key %q", label(h), r.Namespace, r.Name, r.Key)
		}
		h.key = b
	}
	return nil
}
