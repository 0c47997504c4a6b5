package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
	"github.com/kubeplug/kubeplug/pkg/render"
)

func newNodeCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Commands that run on a cluster's machines",
	}
	cmd.AddCommand(newNodeRunCmd(o), newNodeBootCmd(o), newNodeFetchSecretsCmd(o), newNodeStoreTokenCmd(o))
	return cmd
}

func newNodeBootCmd(o *options) *cobra.Command {
	var opts nodeagent.BootOptions
	cmd := &cobra.Command{
		Use:   "boot",
		Short: "Boot this machine: beforeNodeup hooks, the kubelet, afterNodeup hooks",
		Long: `Boot this machine as the rendered kubeplug-boot.service does on every start: run the
beforeNodeup hooks, start the kubelet (the nodeup step, ` + strings.Join(nodeagent.DefaultNodeup, " ") + `),
then run the afterNodeup hooks, with the behaviours of ` + "`kubeplug node run`" + `:

  sync-*    the boot waits for them; async-* run alongside the boot and do not hold it up
  *-enforce a failure fails the node; before the kubelet starts it keeps the kubelet down
  *-bypass  a failure is only reported

The kubelet starts as soon as beforeNodeup's sync hooks have ended without an enforced
failure. The command exits once every hook of both phases has ended. When an enforced hook
failed it writes why to ` + hookspec.FailedMarkerPath + ` (under --root), which the rendered kubelet
drop-in requires to be absent, logs the failure to stderr (the console and the journal) and
exits with status 1. A new boot removes the marker first.`,
		Example: `  # What kubeplug-boot.service runs
  kubeplug node boot

  # A machine in a directory, with another nodeup step
  kubeplug node boot --root /tmp/node-1 --nodeup-command /tmp/node-1/start-kubelet`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Agent.Logger = o.config().Logger
			res, err := nodeagent.Boot(cmd.Context(), opts)
			if res != nil {
				perr := o.print(res, func(w io.Writer) error {
					for _, rep := range res.Reports {
						if err := nodeReportTable(w, rep); err != nil {
							return err
						}
					}
					return nil
				})
				if perr != nil {
					err = errors.Join(err, perr)
				}
			}
			if err != nil {
				_, _ = fmt.Fprintln(o.streams.Err, "Error:", err)
				return errFailed
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Agent.Root, "root", "/", "the directory the machine's paths are relative to")
	f.StringVar(&opts.Agent.Node.Name, "node-name", "", "the node's name for conditions and messages (default: the manifest's, else the host name)")
	f.StringSliceVar(&opts.Nodeup, "nodeup-command", nil, "the command that starts the kubelet, comma-separated (default "+strings.Join(nodeagent.DefaultNodeup, ",")+")")
	f.DurationVar(&opts.NodeupTimeout, "nodeup-timeout", 5*time.Minute, "how long the nodeup command may take")
	f.StringVar(&opts.Agent.S3Endpoint, "s3-endpoint", os.Getenv("KUBEPLUG_S3_ENDPOINT"), "the URL of an S3-compatible store for s3:// hooks, addressed path-style ($KUBEPLUG_S3_ENDPOINT; default AWS S3)")
	f.DurationVar(&opts.Agent.FetchTimeout, "fetch-timeout", 2*time.Minute, "how long the download of one url hook's script may take")
	_ = cmd.MarkFlagDirname("root")
	return cmd
}

func newNodeFetchSecretsCmd(o *options) *cobra.Command {
	var opts nodeagent.FetchSecretsOptions
	cmd := &cobra.Command{
		Use:   "fetch-secrets --url s3://BUCKET/KEY",
		Short: "Write this machine's boot secrets, fetched with its own identity",
		Long: `Fetch the provider's part of this machine's boot — the cluster's CA, the kubelet's
bootstrap kubeconfig and configuration, kube-proxy's identity, and on a control-plane
machine the PKI and the components' kubeconfig — from an S3 object the provider uploaded
(encrypted with SSE-KMS, readable by the pool's instance role only), and write its files
with their modes (keys 0600), each atomically. The AWS SDK's default chain gives the
machine's identity: on EC2 the instance role, through the instance metadata service.

On the aws provider the rendered kubeplug-boot.service runs it before the boot (the
drop-in ` + render.BootSecretsDropIn + `), so no hook runs and the kubelet does not start
without the secrets. A missing object is asked for again until --wait ends: up uploads
it once the cluster's stacks are deployed, which may be after the machine booted. Every
error names the URL.`,
		Example: `  # What the aws provider's machines run before their boot
  kubeplug node fetch-secrets --url s3://acme-kubeplug/kubeplug-demo/boot/workers/` + render.BootSecretsFile + ` --wait 20m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Logger = o.config().Logger
			bs, err := nodeagent.FetchSecrets(cmd.Context(), opts)
			if err != nil {
				return err
			}
			for _, f := range bs.Files {
				_, _ = fmt.Fprintf(o.streams.Err, "wrote %s (%s)\n", f.Path, f.Mode)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.URL, "url", "", "the boot secrets object, s3://BUCKET/KEY (required)")
	f.StringVar(&opts.Root, "root", "/", "the directory the machine's paths are relative to")
	f.DurationVar(&opts.Wait, "wait", 0, "how long to wait for an object that is not there yet")
	f.StringVar(&opts.S3Endpoint, "s3-endpoint", os.Getenv("KUBEPLUG_S3_ENDPOINT"), "the URL of an S3-compatible store, addressed path-style ($KUBEPLUG_S3_ENDPOINT; default AWS S3)")
	_ = cmd.MarkFlagRequired("url")
	_ = cmd.MarkFlagDirname("root")
	return cmd
}

func newNodeStoreTokenCmd(o *options) *cobra.Command {
	var (
		opts       storeTokenOptions
		kubeconfig string
	)
	cmd := &cobra.Command{
		Use:   "store-token --kubeconfig FILE --token-file FILE --group GROUP",
		Short: "Store the workers' bootstrap token as the control plane's first act",
		Long: `Store a bootstrap token made up front (the aws provider's, which travels in the
workers' boot secrets) in the cluster once its API server answers, as kubeadm's init
does: the bootstrap.kubernetes.io/token Secret (kept when it is there) and the RBAC that
lets the token's kubelets get client certificates, and the nodes renew theirs, approved.
On the aws provider's control-plane machine the unit kubeplug-bootstrap-token.service of
its boot secrets runs it; the API server is asked again until --wait ends.`,
		Example: `  kubeplug node store-token --kubeconfig /etc/kubernetes/admin.conf \
    --token-file /etc/kubeplug/bootstrap-token --group system:bootstrappers:kubeplug:aws --wait 30m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("store the bootstrap token: %w", err)
			}
			if opts.Client, err = kubernetes.NewForConfig(cfg); err != nil {
				return fmt.Errorf("store the bootstrap token: %w", err)
			}
			opts.Logger = o.config().Logger
			return storeToken(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "/etc/kubernetes/admin.conf", "an administrator's kubeconfig of the cluster")
	f.StringVar(&opts.TokenFile, "token-file", "", "the file holding the token, <id>.<secret> (required)")
	f.StringVar(&opts.Group, "group", "", "the extra group the token's kubelets authenticate in (required)")
	f.StringVar(&opts.Owner, "owner", "machines", "names the ClusterRoleBindings, kubeplug:OWNER:...")
	f.DurationVar(&opts.TTL, "ttl", 24*time.Hour, "how long the token serves a first TLS bootstrap, from when it is first stored")
	f.DurationVar(&opts.Wait, "wait", 0, "how long to ask an API server that does not answer yet again")
	_ = cmd.MarkFlagRequired("token-file")
	_ = cmd.MarkFlagRequired("group")
	return cmd
}

func newNodeRunCmd(o *options) *cobra.Command {
	var (
		phase  string
		opts   nodeagent.Options
		labels map[string]string
	)
	cmd := &cobra.Command{
		Use:   "run --phase beforeNodeup|afterNodeup|afterDeploy",
		Short: "Run the plugins' node hooks of one boot phase on this machine",
		Long: `Run the node hooks that plugins contributed to this machine's pool, for one phase.
The machine's boot (` + "`kubeplug node boot`" + `) runs beforeNodeup, starts the kubelet (nodeup),
then runs afterNodeup; the deploy triggers afterDeploy (kubeplug-after-deploy.path runs this
command when ` + hookspec.AfterDeployTriggerPath + ` appears).

The hooks come from ` + hookspec.HooksManifestPath + ` (or --config), which kubeplug render writes
into the machine's cloud-init or Ignition config together with each script hook's script
under ` + hookspec.HooksDir + `/<plugin>/<hook>. They run in file order, except that a hook
runs after the hooks it requires and those naming it in before (a hook whose required
hook failed, was skipped or did not run is not run; a loop is an error naming it). Each
runs according to its behavior:

  sync-enforce   the next hook waits for it; a failure fails the node and stops the phase
  sync-bypass    the next hook waits for it; a failure is only reported
  async-enforce  runs alongside the hooks after it; a failure fails the node when it ends
  async-bypass   runs alongside the hooks after it; a failure is only reported

The command waits for async hooks before it exits. A hook runs in its own process group
with the root as working directory and KUBEPLUG_ROOT, KUBEPLUG_PHASE, KUBEPLUG_PLUGIN,
KUBEPLUG_HOOK and KUBEPLUG_NODE set; past its timeout (default 5m) the group is killed.
A hook whose CEL condition ("when") is false is skipped; one that does not compile fails.
Conditions see cluster.{name,kubernetesVersion} and node.{name,pool,role,labels}; compare
versions with versionAtLeast(cluster.kubernetesVersion, '1.30') or semver(a) >= semver(b).

A url hook's script is downloaded when it runs (https://, or s3:// with the AWS SDK's
credentials and --s3-endpoint for an S3-compatible store), within --fetch-timeout, and
runs only when its sha256 matches; it is cached by digest under <root>` + nodeagent.CacheDir + `.

Every path is under --root (default /), so a directory can stand for a machine. What ran
is reported on stdout and written to <root>` + nodeagent.ReportsDir + `/<phase>.json. Hooks
that succeeded are recorded under <root>` + nodeagent.StateDir + ` and skipped when the phase
runs again, so an interrupted boot converges; --force runs them again, except hooks
marked once, which never run again after a success.

The exit status is 1 when an enforced hook failed, naming the hook and the node.`,
		Example: `  # What the boot runs before starting the kubelet
  kubeplug node run --phase beforeNodeup

  # A simulated node in a directory, with the facts its conditions see
  kubeplug node run --phase afterNodeup --root /tmp/node-1 --node-name node-1 \
    --pool workers --role worker --kubernetes-version 1.37.2 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Node.Labels = labels
			opts.Logger = o.config().Logger
			a, err := nodeagent.New(opts)
			if err != nil {
				return err
			}
			rep, err := a.Run(cmd.Context(), phase)
			if rep == nil {
				return err
			}
			if perr := o.print(rep, func(w io.Writer) error { return nodeReportTable(w, rep) }); perr != nil {
				return errors.Join(err, perr)
			}
			if err != nil {
				_, _ = fmt.Fprintln(o.streams.Err, "Error:", err)
				return errFailed
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&phase, "phase", "", "the entry point to run: beforeNodeup, afterNodeup or afterDeploy")
	f.StringVar(&opts.Root, "root", "/", "the directory the machine's paths are relative to")
	f.StringVar(&opts.Node.Name, "node-name", "", "the node's name for conditions and messages (default: the manifest's, else the host name)")
	f.StringVar(&opts.Node.Pool, "pool", "", "the node pool, as node.pool in conditions (default: the manifest's)")
	f.StringVar(&opts.Node.Role, "role", "", "the node's role, as node.role in conditions (default: the manifest's)")
	f.StringToStringVar(&labels, "label", nil, "a node label key=value, as node.labels in conditions (repeatable)")
	f.StringVar(&opts.Cluster.Name, "cluster-name", "", "the cluster's name, as cluster.name in conditions (default: the manifest's)")
	f.StringVar(&opts.Cluster.KubernetesVersion, "kubernetes-version", "", "as cluster.kubernetesVersion in conditions (default: the manifest's)")
	f.BoolVar(&opts.Force, "force", false, "run hooks that already succeeded in an earlier run of the phase (not once hooks)")
	f.StringVar(&opts.Manifest, "config", "", "the hooks manifest to run (default <root>"+hookspec.HooksManifestPath+")")
	f.StringVar(&opts.S3Endpoint, "s3-endpoint", os.Getenv("KUBEPLUG_S3_ENDPOINT"), "the URL of an S3-compatible store for s3:// hooks, addressed path-style ($KUBEPLUG_S3_ENDPOINT; default AWS S3)")
	f.DurationVar(&opts.FetchTimeout, "fetch-timeout", 2*time.Minute, "how long the download of one url hook's script may take")
	_ = cmd.MarkFlagRequired("phase")
	_ = cmd.MarkFlagDirname("root")
	_ = cmd.MarkFlagFilename("config", "json")
	_ = cmd.RegisterFlagCompletionFunc("phase", cobra.FixedCompletions(hookspec.Phases, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func nodeReportTable(w io.Writer, rep *nodeagent.Report) error {
	if len(rep.Hooks) == 0 {
		_, err := fmt.Fprintf(w, "no hooks for phase %s on node %s\n", rep.Phase, rep.Node)
		return err
	}
	rows := make([][]string, 0, len(rep.Hooks))
	for _, h := range rep.Hooks {
		exit := ""
		if h.ExitCode != nil {
			exit = strconv.Itoa(*h.ExitCode)
		}
		dur := ""
		if !h.StartedAt.IsZero() {
			dur = time.Duration(h.Duration).Round(time.Millisecond).String()
		}
		rows = append(rows, []string{h.Plugin, h.Name, h.Behavior, string(h.Status), exit, dur, oneLine(h.Reason)})
	}
	if err := table(w, []string{"PLUGIN", "HOOK", "BEHAVIOR", "STATUS", "EXIT", "DURATION", "REASON"}, rows); err != nil {
		return err
	}
	// What each hook printed, one line each prefixed with plugin/hook, so that
	// on a machine it reaches the journal (kubeplug-boot.service's output)
	// and not only the report.
	for _, h := range rep.Hooks {
		for _, stream := range []struct{ name, text string }{{"stdout", h.Stdout}, {"stderr", h.Stderr}} {
			for line := range strings.SplitSeq(strings.TrimRight(stream.text, "\n"), "\n") {
				if line == "" {
					continue
				}
				if _, err := fmt.Fprintf(w, "%s/%s %s: %s\n", h.Plugin, h.Name, stream.name, line); err != nil {
					return err
				}
			}
		}
	}
	for _, h := range rep.Hooks {
		if h.Warning != "" {
			if _, err := fmt.Fprintf(w, "warning: hook %s of plugin %s: %s\n", h.Name, h.Plugin, h.Warning); err != nil {
				return err
			}
		}
	}
	return nil
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
