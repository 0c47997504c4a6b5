package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

func stateDirFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "state-dir", "", "the local cluster's state directory (default $XDG_STATE_HOME/kubeplug/clusters/NAME, else ~/.local/state/kubeplug/clusters/NAME)")
	_ = cmd.MarkFlagDirname("state-dir")
}

func newUpCmd(o *options) *cobra.Command { return upCmd(o, action.NewUp(o.cfg)) }

// upCmd binds the up command's flags into u.
func upCmd(o *options, u *action.Up) *cobra.Command {
	var file, dryRun string
	var noKubeconfig bool
	var checkProviderFlags func(run bool) error
	cmd := &cobra.Command{
		Use:   "up -f cluster.yaml",
		Short: "Bring a whole cluster up: control plane, nodes, plugins, checks",
		Long: `Run every stage of the cluster file on the cluster's provider (the local
provider by default): start the control plane with the flags, feature gates and
volumes plugins contribute; create each node pool's nodes (simulated kubelets
carrying the pools' labels and taints), whose machines run the plugins' hooks
(beforeNodeup, then the node joins, then afterNodeup) and receive their files
and systemd units; deploy every plugin's Kubernetes content once the plugins it
waits for are ready, waiting for its readiness; run the machines' afterDeploy hooks; run every plugin's validate
checks.

Up on a running cluster applies the difference: new plugins are installed,
removed ones uninstalled, changed flags restart the component that needs them,
changed pools add or remove nodes. An interrupted up (Ctrl-C) stops cleanly and a
re-run continues.

Two runs never work on one cluster at once: a second up waits up to
--lock-timeout for the first to finish (and for an apply, uninstall or
rollback holding the cluster's operation lease), then fails naming the holder,
changing nothing.

The cluster's kubeconfig is written to its state directory and merged into your
kubeconfig ($KUBECONFIG or ~/.kube/config) as context kubeplug-NAME, which becomes
the current context — so kubectl and kubeplug status work at once. Use
--no-kubeconfig-update to leave your kubeconfig alone and
"kubeplug get-kubeconfig -f FILE" to find the cluster's own.

With spec.provider.aws, up uploads the rendered files to S3 and deploys the cloud
template and the plugins' stacks through CloudFormation change sets, printing each
change set before it runs and streaming the stacks' events, then uploads each pool's
boot secrets (the PKI, the kubelet's configuration, the bootstrap token) to S3,
encrypted with SSE-KMS and readable by the pool's instance role only; the machines
fetch them at boot, and the control-plane machine stores the workers' bootstrap
token. kubeplug does not wait for the machines nor reach their API server: no
plugin's Kubernetes content is deployed and no live check runs (docs/aws.md).
'kubeplug down' deletes what it created (docs/aws.md).

The local provider runs the Kubernetes version the file names, from its binary
cache, the binaries built from Go modules (make localcluster), or a verified
download of the release binaries, in that order (docs/versions.md);
--build-from-source uses only binaries built from Go modules.

--restore-from FILE brings the cluster back from an etcd snapshot that
"kubeplug etcd snapshot" wrote (its objects, the plugins' release records, its
CA and service-account keys) before its control plane starts: after "kubeplug
down --purge", or onto new machines. A snapshot that is truncated, corrupt or of
another cluster is refused naming the file; so is a restore onto a cluster that
exists in the state directory, unless --force (docs/ha.md).

--dry-run starts nothing: it prints what up would bring up, the plugins in
their waves and what each contributes, as 'kubeplug plan' does ('kubeplug
render' writes the files). On a running cluster, 'kubeplug apply FILE
--dry-run=server' has its API server check every object.`,
		Example: `  kubeplug up -f examples/quickstart/cluster.yaml
  kubeplug up examples/quickstart/cluster.yaml --dry-run   # what would come up; nothing starts
  kubectl get nodes
  kubectl get pods -A
  kubeplug status

  # Change cluster.yaml (enable a plugin, change a flag), then apply the difference
  kubeplug up -f examples/quickstart/cluster.yaml
  kubeplug down -f examples/quickstart/cluster.yaml --purge`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkProviderFlags(dryRun == "" || dryRun == "none"); err != nil {
				return err
			}
			switch dryRun {
			case "", "none":
			case "client":
				if err := runPlan(cmd, o, file, ""); err != nil {
					return err
				}
				_, _ = fmt.Fprintf(o.streams.Err, "dry run: nothing was started; kubeplug up %s brings this up\n", file)
				return nil
			case "server":
				return fmt.Errorf("up --dry-run=server is not supported: up starts the API server it would ask; use --dry-run (print what up would bring up, start nothing), or kubeplug apply %s --dry-run=server on a running cluster", file)
			default:
				return fmt.Errorf("invalid --dry-run %q: expected client (the default: print what up would bring up, start nothing) or none", dryRun)
			}
			pr := newProgress(o)
			o.cfg.Progress, u.Events, u.ProviderEvents = pr.stage, pr.event, pr.providerEvent
			res, l := withCluster(file, func(cl *config.Cluster) (*action.UpResult, diag.List) { return u.Run(cmd.Context(), cl) })
			pr.close()
			failed := o.report(l)
			if res != nil && res.Kubeconfig != "" && !noKubeconfig {
				ctxName, err := action.MergeKubeconfig(res.Kubeconfig, res.Cluster)
				if err != nil {
					_, _ = fmt.Fprintf(o.streams.Err, "warning: %v\n", err)
				} else {
					res.Context = ctxName
				}
			}
			if res == nil || cmd.Context().Err() != nil {
				// No verdict: another run held the cluster, or Ctrl-C
				// stopped this one (its error says how to continue).
				return errFailed
			}
			switch o.output {
			case "json":
				bs, _ := json.Marshal(map[string]any{"type": "Summary", "result": res, "failed": failed})
				_, _ = fmt.Fprintln(o.streams.Out, string(bs))
			case "text":
				printUpSummary(o.streams.Out, res, failed, file)
			default:
				if err := o.print(res, nil); err != nil {
					return err
				}
			}
			if failed {
				return errFailed
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	clusterFileArg(cmd)
	lockedFlag(cmd, o)
	expansionFlags(cmd, o)
	deployFlags(cmd, &u.DeployOptions)
	cmd.Flags().StringVar(&dryRun, "dry-run", "none", `"client" (or just --dry-run): start nothing, print what up would bring up (as kubeplug plan)`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "client"
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions([]string{"none", "client"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().BoolVar(&noKubeconfig, "no-kubeconfig-update", false, "do not merge the cluster's context into your kubeconfig")
	// The linked providers' own flags (--build-from-source, --restore-from,
	// --accept-new-host-keys, ...), registered at the binary's edge.
	checkProviderFlags = provider.DefineFlags(cmd.Flags(), &u.ProviderOptions)
	stateDirFlag(cmd, &u.StateDir)
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}

// printUpSummary writes what up brought up, section by section: the
// cluster's state, its plugins, its nodes, the notes on what changed, its
// cloud stacks and how to reach it.
func printUpSummary(w io.Writer, res *action.UpResult, failed bool, file string) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nCluster %s is %s after %s.\n\n", res.Cluster, upState(res, failed), res.Ready)
	_ = table(&b, []string{"PLUGIN", "VERSION", "CONTRIBUTED", "VALIDATE"}, upPluginRows(res))
	if len(res.LessTested) > 0 {
		fmt.Fprintf(&b, "\n%s\n", lessTestedNote(res.LessTested))
	}
	writeUpNodes(&b, res)
	writeUpNotes(&b, res, file)
	writeUpStacks(&b, res)
	writeUpAccess(&b, res)
	_, _ = io.WriteString(w, b.String())
}

// upState is how the summary's first line calls the cluster.
func upState(res *action.UpResult, failed bool) string {
	switch {
	case failed:
		return "NOT ready (see the errors above)"
	case res.Kubeconfig == "" && res.Deployed != nil:
		return "deployed (its cloud resources and boot secrets; kubeplug does not wait for its machines, docs/aws.md)"
	}
	return "ready"
}

// upPluginRows are the plugins' rows: version, what each contributed, and how
// many of its validate checks passed (once it was applied).
func upPluginRows(res *action.UpResult) [][]string {
	rows := [][]string{}
	for _, name := range slices.Sorted(maps.Keys(res.Versions)) {
		var what []string
		for _, k := range slices.Sorted(maps.Keys(res.Contributed[name])) {
			what = append(what, fmt.Sprintf("%d %s", res.Contributed[name][k], k))
		}
		rows = append(rows, []string{name, res.Versions[name], strings.Join(what, ", "), upChecks(res, name)})
	}
	return rows
}

// upChecks is "passed/all" of plugin's validate checks, or "-".
func upChecks(res *action.UpResult, plugin string) string {
	if res.ApplyResult == nil {
		return "-"
	}
	ok, n := 0, 0
	for _, c := range res.Checks {
		if c.Plugin == plugin {
			n++
			if c.OK {
				ok++
			}
		}
	}
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d passed", ok, n)
}

// writeUpNodes writes the real nodes' table, when there are any.
func writeUpNodes(b *strings.Builder, res *action.UpResult) {
	if len(res.Nodes) == 0 {
		return
	}
	b.WriteString("\n")
	nrows := [][]string{}
	for _, n := range res.Nodes {
		nrows = append(nrows, []string{n.Name, n.Pool, readyText(n.Ready), hooksText(n.Hooks)})
	}
	_ = table(b, []string{"NODE", "POOL", "READY", "HOOKS"}, nrows)
}

// writeUpNotes writes what changed beside the plugins: restarted components,
// the lock file's updates and the newer versions held back.
func writeUpNotes(b *strings.Builder, res *action.UpResult, file string) {
	if len(res.Restarted) > 0 {
		fmt.Fprintf(b, "\nrestarted: %s\n", strings.Join(res.Restarted, ", "))
	}
	if res.ApplyResult == nil {
		return
	}
	if len(res.LockUpdated) > 0 {
		fmt.Fprintf(b, "\nkubeplug.lock updated: %s\n", strings.Join(res.LockUpdated, "; "))
	}
	if len(res.Newer) > 0 {
		fmt.Fprintf(b, "\n%s\n", heldBack(res.Newer, file))
	}
}

// writeUpStacks writes the cloud stacks a provider deployed, when it did.
func writeUpStacks(b *strings.Builder, res *action.UpResult) {
	d := res.Deployed
	if d == nil {
		return
	}
	b.WriteString("\n")
	srows := [][]string{}
	for _, name := range slices.Sorted(maps.Keys(d.Stacks)) {
		st := d.Stacks[name]
		var outs []string
		for _, k := range slices.Sorted(maps.Keys(st.Outputs)) {
			outs = append(outs, k+"="+st.Outputs[k])
		}
		srows = append(srows, []string{st.StackName, st.Status, strings.Join(outs, " ")})
	}
	_ = table(b, []string{"STACK", "STATUS", "OUTPUTS"}, srows)
}

// writeUpAccess writes how to reach the cluster: its kubeconfig and context,
// and its state directory.
func writeUpAccess(b *strings.Builder, res *action.UpResult) {
	if res.Kubeconfig != "" {
		fmt.Fprintf(b, "\nkubeconfig: %s\n", res.Kubeconfig)
	} else {
		b.WriteString("\n")
	}
	if res.Context != "" {
		fmt.Fprintf(b, "context:    %s (now your current context)\n", res.Context)
	}
	fmt.Fprintf(b, "state:      %s\n", res.StateDir)
}

func readyText(ok bool) string {
	if ok {
		return "Ready"
	}
	return "NotReady"
}

// hooksText summarises a node's hook phases: "beforeNodeup 2 ok, afterNodeup 1 ok 1 skipped".
func hooksText(h map[string]provider.HookSummary) string {
	var parts []string
	for _, phase := range []string{"beforeNodeup", "afterNodeup", "afterDeploy"} {
		s, ok := h[phase]
		if !ok {
			continue
		}
		t := phase
		for _, c := range []struct {
			n    int
			what string
		}{{s.Succeeded, "ok"}, {s.Skipped, "skipped"}, {s.Failed, "FAILED"}, {s.NotRun, "not run"}} {
			if c.n > 0 {
				t += fmt.Sprintf(" %d %s", c.n, c.what)
			}
		}
		if t != phase {
			parts = append(parts, t)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
