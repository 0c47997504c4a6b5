package stage

// Facts are what a plugin may need to know of the cluster it runs in, one
// documented set for every template (.Facts) and every plugin's code
// (Request.Facts), filled the same way for every provider: the engine from the
// cluster file and the plugins' values, then the provider for what only it
// knows. docs/plugin-format.md lists them. A fact a provider cannot know when
// the plan is made is empty, never a guess.
type Facts struct {
	// Provider is the cluster's provider: local, aws or hosts.
	Provider string `json:"provider"`
	// KubernetesVersion is the cluster's, like 1.37.1.
	KubernetesVersion string `json:"kubernetesVersion"`
	// APIEndpoint is the API server's URL as the cluster's machines reach it
	// (https://10.0.0.2:6443); empty when the provider learns it only at
	// deploy (aws: the load balancer's name is the core stack's
	// APIServerEndpoint output, in model.Deployed).
	APIEndpoint string `json:"apiEndpoint"`
	// ClusterCIDR is the machines' network: the VPC's range on aws, the local
	// machines' network; empty when the provider does not choose it (hosts).
	ClusterCIDR string `json:"clusterCIDR"`
	// ServiceCIDR and PodCIDR are the Services' and the Pods' ranges (the
	// control-plane plugin's serviceClusterIPRange and clusterCIDR).
	ServiceCIDR string `json:"serviceCIDR"`
	PodCIDR     string `json:"podCIDR"`
	// DNSDomain is the cluster's DNS domain (cluster.local) and DNSIP the
	// cluster DNS Service's address (the cluster-dns plugin's clusterIP).
	DNSDomain string `json:"dnsDomain"`
	DNSIP     string `json:"dnsIP"`
	// CNI names the network plugin the provider's machines are set up with
	// ("bridge" for the local and hosts providers' bridge configuration);
	// empty when the provider sets up none and a plugin must bring one (aws).
	CNI string `json:"cni"`
	// NodeRoles maps each machine role to the label its Nodes carry
	// (control-plane: node-role.kubernetes.io/control-plane).
	NodeRoles map[string]string `json:"nodeRoles"`
	// Pools maps each node pool, the control-plane pseudo pool included, to its role.
	Pools map[string]string `json:"pools"`
}
