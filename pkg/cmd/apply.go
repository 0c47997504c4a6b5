package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/check"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/lease"
)

// leaseFlags binds how a command that changes plugins takes the cluster's
// operation lease.
func leaseFlags(cmd *cobra.Command, l *action.Lease) {
	cmd.Flags().DurationVar(&l.Wait, "lock-timeout", time.Minute, "how long to wait while another kubeplug operation holds the cluster's lease (0: fail at once)")
	cmd.Flags().DurationVar(&l.Duration, "lease-duration", lease.DefaultDuration, "how long the operation lease lasts unless renewed; a killed run blocks the next for at most this long")
	_ = cmd.Flags().MarkHidden("lease-duration")
}

// targetFlags binds which running cluster a command talks to.
func targetFlags(cmd *cobra.Command, c *action.KubeconfigTarget) {
	// kubectl's own flag set: --kubeconfig, --context, --cluster, --user, --as,
	// --as-group, --as-uid, --token, --server, --certificate-authority,
	// --insecure-skip-tls-verify, --tls-server-name, --request-timeout, ...
	// Not --namespace: each plugin's objects name their own.
	cf := genericclioptions.NewConfigFlags(false)
	cf.Namespace = nil
	cf.CacheDir = nil
	c.Flags = cf
	cf.AddFlags(cmd.Flags())
	_ = cmd.MarkFlagFilename("kubeconfig")
	// --context completes from the kubeconfig (registerCompletions).
}

// deployFlags binds how apply and up deploy the plugins' content: one set of
// flags for both commands, bound straight into the action's options.
func deployFlags(cmd *cobra.Command, d *action.DeployOptions) {
	cmd.Flags().DurationVar(&d.Timeout, "timeout", 5*time.Minute, "how long each plugin may take to become ready")
	cmd.Flags().BoolVar(&d.ForceConflicts, "force-conflicts", false, "take over fields that another field manager owns")
	cmd.Flags().BoolVar(&d.ForceCRDChanges, "force-crd-changes", false, "apply CustomResourceDefinition changes that would break existing objects or clients (removed versions or fields, narrowed types)")
	cmd.Flags().BoolVar(&d.RollbackOnFailure, "rollback-on-failure", false, "restore the previous revision of a plugin whose objects do not become ready (uninstall it when it was new)")
	cmd.Flags().BoolVar(&d.AllowDowngrade, "allow-downgrade", false, "apply plugin versions lower than the installed ones")
	cmd.Flags().IntVar(&d.HistoryMax, "history-max", 10, "how many revisions to keep per plugin")
	leaseFlags(cmd, &d.Lease)
}

// dryRunValue binds --dry-run straight into an action's DryRun: "server" asks
// the API server to check everything without persisting it, "none" does not.
type dryRunValue struct{ dry *bool }

func (v dryRunValue) String() string {
	if v.dry != nil && *v.dry {
		return "server"
	}
	return "none"
}

func (v dryRunValue) Set(s string) error {
	switch s {
	case "", "none":
		*v.dry = false
	case "server":
		*v.dry = true
	default:
		return fmt.Errorf("expected none or server (client-side dry runs are kubeplug render), got %q", s)
	}
	return nil
}

func (dryRunValue) Type() string { return "string" }

func newApplyCmd(o *options) *cobra.Command { return applyCmd(o, action.NewApply(o.cfg)) }

// applyCmd binds the apply command's flags into a.
func applyCmd(o *options, a *action.Apply) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f cluster.yaml",
		Short: "Apply every enabled plugin to a running cluster, in dependency order",
		Long: `Run every stage of the cluster file against the cluster your kubeconfig points at.
Each plugin's Kubernetes content is server-side applied (field manager
"kubeplug"), CRDs and Namespaces first, and waited for until it is ready
(kstatus). A plugin starts as soon as the plugins it waits for in the plan's
waves (what it requires, its after/before hints, the order list) are ready, so a
plugin's dependents never start before it works, and never wait for the rest of
its wave. Objects a plugin's new version or values no longer produce are pruned;
plugins the file no longer enables are uninstalled, dependents first.

A plugin's Helm charts are installed as real Helm releases (helm list shows
them) and upgraded only when the chart or values changed. A release a crashed run
left pending is recovered first. A plugin's health expressions (spec.health) must
hold too.

Once every wave is deployed, each plugin's validate checks (spec.validate) run
against the cluster, wave by wave: waits for objects, CEL expressions over live
objects, executables from the package. A check that does not pass within its
timeout fails the apply, naming the plugin, the check and the last reason; the
summary lists every check (not with --dry-run).

What each plugin applied is recorded as a revision of its release record
(Secrets in kubeplug-system; kubeplug history PLUGIN lists them): a changed
version, package, values or content is a new revision, a re-apply that changes
nothing is not. A failed or interrupted apply leaves the record true to the
cluster, and re-running converges. With --rollback-on-failure a plugin whose
objects do not become ready is restored to its previous revision (objects and
Helm releases), or uninstalled when it was new. A version lower than the
installed one is refused before anything changes, unless --allow-downgrade or
the installed version declares spec.upgrade.allowDowngrade.

Before a plugin's CustomResourceDefinitions replace those in the cluster, the
change is checked: a removed stored or served version, a removed field, a new
required field, a narrowed enum, a changed type or scope, or a dropped
x-kubernetes-preserve-unknown-fields would break existing objects or clients, so
the plugin is refused (every finding listed, nothing of it applied) unless
--force-crd-changes. Adding versions, fields and enum values is safe.

A run holds the Lease kubeplug-operation in kubeplug-system while it changes the
cluster (not with --dry-run): a second run waits up to --lock-timeout for it, then
fails naming the holder. The lease of a run that was killed expires within 30s
and the next run takes it over.

The lease also remembers the name (metadata.name) of the cluster file last
applied to the cluster. A file of another name applied to the current context
(no --context, --kubeconfig or --server, and not the file's own local cluster)
is refused before anything changes: the current context is most likely another
cluster than the file means. Given --context, the cluster takes the new name,
with a warning.`,
		Example: `  kubeplug apply -f cluster.yaml
  kubeplug apply -f cluster.yaml --context staging --timeout 10m
  kubeplug apply -f cluster.yaml --rollback-on-failure
  kubeplug apply -f cluster.yaml --allow-downgrade --history-max 20
  kubeplug apply -f cluster.yaml --dry-run=server
  kubeplug apply -f cluster.yaml -o json | jq 'select(.type=="PluginReady")'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pr := newProgress(o)
			o.cfg.Progress, a.Events = pr.stage, pr.event
			res, l := withCluster(file, func(cl *config.Cluster) (*action.ApplyResult, diag.List) { return a.Run(cmd.Context(), cl) })
			pr.close()
			failed := o.report(l)
			if res == nil {
				return errFailed
			}
			switch o.output {
			case "json":
				bs, _ := json.Marshal(map[string]any{"type": "Summary", "result": res, "failed": failed})
				_, _ = fmt.Fprintln(o.streams.Out, string(bs))
			case "text":
				printChecks(o.streams.Out, res.Checks)
			default:
				if err := o.print(ApplySummary{APIVersion: APIVersion, Kind: "ApplyResult", Failed: failed, ApplyResult: res}, nil); err != nil {
					return err
				}
			}
			if o.output == "text" && !failed {
				verb := "applied"
				if res.DryRun {
					verb = "validated by the server (dry run)"
				}
				_, _ = fmt.Fprintf(o.streams.Out, "%s: %d plugin(s), %d object(s) %s, %d pruned in %s\n", file, len(res.Plugins), res.Applied, verb, res.Pruned, res.Duration)
				if len(res.Removed) > 0 {
					_, _ = fmt.Fprintf(o.streams.Out, "uninstalled: %s\n", strings.Join(res.Removed, ", "))
				}
				if len(res.LockUpdated) > 0 {
					_, _ = fmt.Fprintf(o.streams.Out, "kubeplug.lock updated: %s\n", strings.Join(res.LockUpdated, "; "))
				}
				if len(res.Newer) > 0 {
					_, _ = fmt.Fprintf(o.streams.Out, "%s\n", heldBack(res.Newer, file))
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
	cmd.Flags().Var(dryRunValue{&a.DryRun}, "dry-run", `"server" to have the API server check everything without persisting it`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "server"
	deployFlags(cmd, &a.DeployOptions)
	targetFlags(cmd, &a.Target)
	stateDirFlag(cmd, &a.StateDir)
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions([]string{"none", "server"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// printChecks writes the validate section of apply's summary: one line per
// check; a failed check's reason is in the diagnostics above.
func printChecks(w io.Writer, checks []check.Result) {
	if len(checks) == 0 {
		return
	}
	passed := 0
	for _, c := range checks {
		if c.OK {
			passed++
		}
	}
	_, _ = fmt.Fprintf(w, "validate: %d/%d check(s) passed\n", passed, len(checks))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range checks {
		state := "ok"
		if !c.OK {
			state = "FAILED"
		}
		_, _ = fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Plugin, c.Name, state, c.Duration)
	}
	_ = tw.Flush()
}
