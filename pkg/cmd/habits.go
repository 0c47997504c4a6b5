package cmd

// habits answers the commands that users of kind, Helm and kubectl type by
// habit and kubeplug does not have: what kubeplug does instead, in place of a
// spelling suggestion, which for "install" would be "uninstall" — the opposite.
// Keyed by the command typed at the top level.
var habits = map[string]string{
	// helm install RELEASE CHART, kubectl krew install PLUGIN.
	"install": "kubeplug installs a plugin by enabling it in the cluster file " +
		"(spec.plugins.enabled: [{name: PLUGIN}]) and applying the file: " +
		"kubeplug apply cluster.yaml on a running cluster, or kubeplug up cluster.yaml for a local one; " +
		"kubeplug plugin list shows the plugins there are",
	// helm upgrade.
	"upgrade": "kubeplug upgrades a plugin when the cluster file asks for another version or values: " +
		"change spec.plugins.enabled in the file and run kubeplug apply cluster.yaml (kubeplug plan cluster.yaml shows what would change)",
	// kind create cluster.
	"create": "kubeplug up cluster.yaml creates a local cluster and brings it to the file (kubeplug plugin new NAME creates a plugin)",
	// kind delete cluster, helm delete.
	"delete": "kubeplug down cluster.yaml stops a local cluster (--purge deletes its state); kubeplug uninstall PLUGIN removes a plugin",
	// helm template.
	"template": "kubeplug render cluster.yaml --output-dir DIR writes what the plugins render",
	// helm list, helm ls.
	"list": "kubeplug status lists the plugins installed in the cluster; kubeplug plugin list lists the plugins there are",
	"ls":   "kubeplug status lists the plugins installed in the cluster; kubeplug plugin list lists the plugins there are",
}
