package cmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// importSource is one `kubeplug import` subcommand.
type importSource struct {
	name, use, short, long, example string
}

var importCmds = []importSource{
	{
		name:  action.ImportHelm,
		use:   "helm CHART_DIR|CHART.tgz|oci://REGISTRY/REPO/CHART|NAME --repo URL",
		short: "Import a Helm chart as a plugin that installs it",
		long: `Write NAME/ (NAME: the chart's name as a DNS label) with a plugin.yaml whose one
Helm release installs the chart, copied whole into charts/NAME. The plugin's version
is the chart's version as a semantic version (v1.17.2 becomes 1.17.2, the original
recorded in README.md); the chart's kubeVersion becomes spec.kubernetesVersion. A
chart whose dependencies are not vendored in its charts/ directory is refused: run
'helm dependency build' first.

A chart by reference is fetched as 'helm pull' names it — oci://REGISTRY/REPO/CHART,
or NAME --repo URL of a Helm repository — at --version (a version or a constraint;
default: the highest version that is not a prerelease), checked against the digest
its source announces and kept in the user's cache, then imported as a packaged
chart; README.md records the URL, the version and the archive's digest.`,
		example: `  kubeplug import helm ./podinfo && kubeplug plugin lint podinfo
  kubeplug import helm podinfo-6.14.1.tgz --namespace web --dir imported
  kubeplug import helm oci://ghcr.io/stefanprodan/charts/podinfo --version 6.14.1
  kubeplug import helm metrics-server --repo https://kubernetes-sigs.github.io/metrics-server --version 3.12.2`,
	},
	{
		name:  action.ImportKKP,
		use:   "kkp APPLICATIONDEFINITION.yaml --charts DIR",
		short: "Import a KKP ApplicationDefinition as a versioned plugin catalog",
		long: `Write NAME/ (NAME: the definition's name) as a plugin catalog: one package archive
per version of the definition, each a plugin of that version installing that
version's Helm chart with the definition's default values, and one index.yaml
listing them all, as 'catalog index' writes it. Serve the directory over HTTPS and
use it with --catalog URL/index.yaml; cluster.yaml then picks the version.

A definition names its charts by repository and version only: pull them first
(the error says how) into the --charts directory. Default values that are KKP
templates ({{ .Cluster.… }}) are left out and listed in the README.`,
		example: `  # each version's chart pulled into charts/ first: without --charts the error
  # names the helm pull command of every chart
  kubeplug import kkp cluster-autoscaler.yaml --charts charts`,
	},
	{
		name:  action.ImportKubeAWS,
		use:   "kube-aws PLUGIN_DIR",
		short: "Import a kube-aws plugin directory as a plugin",
		long: `Write NAME/ from a kube-aws plugin (PLUGIN_DIR/plugin.yaml, spec.cluster.*): values
become the plugin's defaults; API server, controller-manager, scheduler and kubelet
flags become control-plane and kubelet flags; machine files, systemd units, kubelet
labels and feature gates become node contributions of the matching role (etcd's on
the control plane); IAM statements and CloudFormation resources and outputs become
cloud contributions; manifests and Helm releases (charts in the plugin directory,
or in --charts) become Kubernetes contributions. Templates stay templates: .Values
as it was, .Config.ClusterName as .Cluster.Metadata.Name, other .Config fields as
values to set. Everything else — PKI key pairs, files outside the plugin, templates
calling kube-aws' own functions, the aws-only constraint — is listed in README.md.`,
		example: `  kubeplug import kube-aws kube-aws/plugins/my-plugin && kubeplug plugin lint my-plugin`,
	},
	{
		name:  action.ImportKops,
		use:   "kops CLUSTER.yaml",
		short: "Import what a kops cluster spec adds to machines and the control plane as a plugin",
		long: `Write NAME/ (NAME: the cluster's FQDN as a DNS label, minimal.example.com becoming
minimal-example-com) from a kops cluster spec (kops get cluster -o yaml, or kops get
all -o yaml with its InstanceGroups): hooks become systemd units written as kops'
nodeup writes them, fileAssets become node files, kubeAPIServer,
kubeControllerManager and kubeScheduler become control-plane flags and kubelet and
masterKubelet kubelet flags, under kops' own flag names. An InstanceGroup's hooks,
fileAssets and kubelet apply to the node pool of its name. The rest of the spec is
the cluster's shape (version, network, subnets, etcd): listed in README.md, for
cluster.yaml.`,
		example: `  kops get cluster minimal.example.com -o yaml > cluster.yaml
  kubeplug import kops cluster.yaml && kubeplug plugin lint minimal-example-com`,
	},
	{
		name:  action.ImportTKE,
		use:   "tke EXPANSION_DIR",
		short: "Import a TKEStack installer expansion as a plugin",
		long: `Write NAME/ (NAME: the directory's name) from a TKEStack expansion directory:
the installer hooks hooks/pre-install, hooks/post-cluster-ready and
hooks/post-install become node hooks on the control-plane machines at beforeNodeup,
afterNodeup and afterDeploy, running the same scripts; each chart in charts/ (a
directory or a .tgz) becomes a Helm release. The parts of the layout tke-installer
reserves but does not read (applications/, files/, provider/, values.yaml) and
images.tar.gz are listed in README.md.`,
		example: `  kubeplug import tke /opt/tke-installer/data/expansions && kubeplug plugin lint expansions`,
	},
}

func newImportCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import SOURCE INPUT",
		Short: "Turn another tool's artifact into kubeplug plugins",
		Long: `Import what another cluster tool already has as kubeplug plugins. Each import writes
its plugins into new directories, with a README.md per plugin saying what was mapped
where, which names and versions were normalised (with the rule and the original),
and every field of the source that could not be mapped; the source file is kept
beside the plugin for review. Every plugin is checked as 'plugin lint' checks it
before anything is written: a failed import leaves nothing behind, and an existing
path is never overwritten. See docs/import.md for each source's mapping.`,
	}
	for _, s := range importCmds {
		cmd.AddCommand(newImportSourceCmd(o, s))
	}
	return cmd
}

func newImportSourceCmd(o *options, s importSource) *cobra.Command {
	a := action.NewImport(nil)
	cmd := &cobra.Command{
		Use:     s.use,
		Short:   s.short,
		Long:    s.long,
		Example: s.example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run := action.NewImport(o.config())
			run.Dir, run.Namespace, run.Charts, run.Repo, run.Version = a.Dir, a.Namespace, a.Charts, a.Repo, a.Version
			res, l := run.Run(cmd.Context(), s.name, args[0])
			if o.report(l) || res == nil {
				return errFailed
			}
			return o.print(res, func(w io.Writer) error {
				for _, p := range res.Plugins {
					if _, err := fmt.Fprintf(w, "imported %s %s into %s (see %s)\n", p.Name, p.Version, p.Path, p.README); err != nil {
						return err
					}
				}
				if res.Catalog != "" {
					if _, err := fmt.Fprintf(w, "catalog index: %s\n", res.Catalog); err != nil {
						return err
					}
				}
				if res.Unmapped > 0 {
					if _, err := fmt.Fprintf(w, "%d field(s) of the source are not mapped; each is listed in the README\n", res.Unmapped); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&a.Dir, "dir", "", "the directory to write the import into (default: the working directory)")
	cmd.Flags().StringVar(&a.Namespace, "namespace", "", "the namespace of the imported Helm releases and namespaced objects (default: per source, see docs/import.md)")
	_ = cmd.MarkFlagDirname("dir")
	if s.name == action.ImportHelm {
		cmd.Flags().StringVar(&a.Repo, "repo", "", "the URL of the Helm repository holding the chart NAME (as helm pull --repo)")
		cmd.Flags().StringVar(&a.Version, "version", "", "the version, or a version constraint, of a chart by reference (default: the highest that is not a prerelease)")
	}
	if s.name == action.ImportKKP || s.name == action.ImportKubeAWS {
		cmd.Flags().StringVar(&a.Charts, "charts", "", "the directory holding each version's chart as `helm pull` writes it (NAME-VERSION.tgz) or unpacked (NAME-VERSION/ or NAME/)")
		_ = cmd.MarkFlagDirname("charts")
	}
	return cmd
}
