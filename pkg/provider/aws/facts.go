package aws

import (
	"strconv"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

func init() {
	provider.RegisterSpecRender(Name, provider.SpecRender{
		Facts:       func(*v1alpha1.Provider) map[string]any { return Facts() },
		BootSecrets: bootSecretsURL,
	})
}

// The control-plane machine on aws, in kubeadm's layout: its ports, where the
// PKI and the components' kubeconfig are (the boot secrets write them there,
// bootsecrets.go).
const (
	controllerManagerPort = 10257
	schedulerPort         = 10259
	etcdClientPort        = 2379
	etcdPeerPort          = 2380
	factPKIDir            = "/etc/kubernetes/pki"
	factKubeconfig        = "/etc/kubernetes/admin.conf"
	// factLocal is the address of what only the machine itself reaches.
	factLocal = "127.0.0.1"
)

var _ provider.FactSource = (*Provider)(nil)

// Facts are the control-plane machine's facts on aws, the control-plane
// plugin's "machine" value. A machine of an Auto Scaling group learns its
// private address only at boot, and one rendered file serves every machine of
// the pool, so the API server binds 0.0.0.0 and advertises the address of
// its default route's interface (the instance's private address; the
// template's load balancer reaches it there). What only the machine reaches —
// etcd, its client and peer URLs, and the controller manager's and scheduler's
// secure ports — is on loopback. The PKI and the components' kubeconfig (server
// https://127.0.0.1:6443: a machine does not reach itself through its own
// network load balancer) come from the boot secrets. They depend on nothing
// but the provider, so render shows them too (provider.SpecRender).
func Facts() map[string]any {
	return map[string]any{
		"address":      "0.0.0.0",
		"localAddress": factLocal,
		"ports": map[string]any{
			"apiServer":         apiServerPort,
			"controllerManager": controllerManagerPort,
			"scheduler":         schedulerPort,
		},
		"etcdServers": "http://" + factLocal + ":" + strconv.Itoa(etcdClientPort),
		"etcd": map[string]any{
			"name": "control-plane-0", "dataDir": "/var/lib/etcd",
			"clientPort": etcdClientPort, "peerPort": etcdPeerPort,
			"fsync": true,
		},
		"pkiDir":                   factPKIDir,
		"kubeconfig":               factKubeconfig,
		"perControllerCredentials": true,
	}
}

// Facts implements provider.FactSource (see the package function Facts).
func (*Provider) Facts() (map[string]any, error) { return Facts(), nil }
