package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

func newDiffCmd(o *options) *cobra.Command {
	var file, dir string
	var live, exitCode bool
	drift := action.NewDrift(o.cfg)
	cmd := &cobra.Command{
		Use:   "diff -f cluster.yaml (--against DIR | --live)",
		Short: "Show what a re-render would change, or how the cluster drifted from the file",
		Long: `With --against DIR, render the cluster in memory and print a unified diff against
DIR, a previous 'kubeplug render' (a directory without render's .kubeplug-render
marker is refused). Nothing is written. Sensitive values are *** on both sides.

With --live, compare every object the file's plugins would apply with the cluster
your kubeconfig points at: the API server dry-runs a server-side apply of each
(field manager "kubeplug", nothing is changed) and each field where that differs
from the live object is printed as a JSON pointer with the live and the desired
value — someone changed it since kubeplug applied it, or the file now says
otherwise — and missing objects are listed. Metadata the server maintains, status
and the paths a plugin declares in spec.drift.ignore are not drift. Values of
Secrets and values containing a plugin's sensitive values are never shown. Helm
releases' objects are not compared. 'kubeplug apply' corrects what this shows
(--force-conflicts to take back fields another field manager now owns).

On a provider that deploys to a cloud (spec.provider.aws), --live runs
CloudFormation's drift detection on every stack 'kubeplug up' deployed instead and
prints each stack's status (IN_SYNC, DRIFTED) with its modified or deleted
resources; an endpoint that does not detect drift (an emulator) is an error saying
so (docs/aws.md).

With --exit-code, exit 2 when there are differences (exit 1 means the command
failed), for CI drift checks.`,
		Example: `  kubeplug diff -f examples/quickstart/cluster.yaml --against out
  kubeplug diff -f cluster.yaml --live --exit-code
  kubeplug diff -f cluster.yaml --live -o json | jq '.[].objects[]?.object'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if live == (dir != "") {
				return fmt.Errorf("give either --against DIR or --live")
			}
			if live {
				cloud := action.NewCloudDrift(o.cfg)
				cloud.StateDir = drift.StateDir
				var stacks []provider.StackDrift
				res, l := withCluster(file, func(cl *config.Cluster) ([]deploy.PluginDrift, diag.List) {
					if cloud.Applies(cl) {
						var l diag.List
						stacks, l = cloud.Run(cmd.Context(), cl)
						return nil, l
					}
					return drift.Run(cmd.Context(), cl)
				})
				if stacks != nil {
					return printCloudDrift(o, stacks, exitCode, l)
				}
				if o.report(l) {
					return errFailed
				}
				if res == nil {
					res = []deploy.PluginDrift{}
				}
				if err := o.print(res, func(w io.Writer) error { return printDrift(w, o.streams.Err, res) }); err != nil {
					return err
				}
				if exitCode && drifted(res) {
					return exitError{code: 2}
				}
				return nil
			}
			files, l := withCluster(file, func(cl *config.Cluster) ([]action.FileDiff, diag.List) {
				return action.NewDiff(o.cfg).Files(cmd.Context(), cl, dir)
			})
			if o.report(l) {
				return errFailed
			}
			err := o.print(RenderDiff{APIVersion: APIVersion, Kind: "RenderDiff", Files: files}, func(w io.Writer) error {
				for _, f := range files {
					if _, err := io.WriteString(w, f.Diff); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			if exitCode && len(files) > 0 {
				return exitError{code: 2}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	clusterFileArg(cmd)
	cmd.Flags().StringVar(&dir, "against", "", "a previous render to compare with")
	cmd.Flags().BoolVar(&live, "live", false, "compare with the running cluster instead (drift)")
	cmd.Flags().BoolVar(&exitCode, "exit-code", false, "exit 2 when there are differences")
	expansionFlags(cmd, o)
	targetFlags(cmd, &drift.Target)
	stateDirFlag(cmd, &drift.StateDir)
	cmd.MarkFlagsMutuallyExclusive("against", "live")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	_ = cmd.MarkFlagDirname("against")
	return cmd
}

// printCloudDrift prints each stack's drift status and its drifted resources.
func printCloudDrift(o *options, stacks []provider.StackDrift, exitCode bool, l diag.List) error {
	if o.report(l) {
		return errFailed
	}
	err := o.print(stacks, func(w io.Writer) error {
		var b strings.Builder
		for _, s := range stacks {
			fmt.Fprintf(&b, "stack %s: %s\n", s.Stack, s.Status)
			for _, r := range s.Resources {
				fmt.Fprintf(&b, "  %s\n", r)
			}
		}
		_, err := io.WriteString(w, b.String())
		return err
	})
	if err != nil {
		return err
	}
	for _, s := range stacks {
		if exitCode && s.Status == "DRIFTED" {
			return exitError{code: 2}
		}
	}
	return nil
}

func drifted(drift []deploy.PluginDrift) bool {
	for _, pd := range drift {
		if len(pd.Objects) > 0 {
			return true
		}
	}
	return false
}

// printDrift writes one block per drifted plugin: each object, and each field as
// "POINTER: live VALUE, desired VALUE". A summary goes to status (stderr), so that
// no drift prints nothing on out, as diff does.
func printDrift(out, status io.Writer, drift []deploy.PluginDrift) error {
	var b strings.Builder
	objects, changed := 0, 0
	for _, pd := range drift {
		objects += pd.Checked
		if len(pd.Objects) == 0 {
			continue
		}
		changed += len(pd.Objects)
		fmt.Fprintf(&b, "plugin %s: %d of %d object(s) drifted\n", pd.Plugin, len(pd.Objects), pd.Checked)
		for _, od := range pd.Objects {
			if od.Missing {
				fmt.Fprintf(&b, "  %s: missing\n", od.Object)
				continue
			}
			fmt.Fprintf(&b, "  %s:\n", od.Object)
			for _, f := range od.Fields {
				var what string
				switch {
				case f.Redacted && od.Object.Kind == "Secret" && od.Object.Group == "":
					what = deploy.RedactedValue
				case f.Redacted:
					what = "(sensitive value changed)"
				default:
					what = "live " + driftValue(f.Live) + ", desired " + driftValue(f.Desired)
				}
				if len(f.ChangedBy) > 0 {
					what += " (changed by " + strings.Join(f.ChangedBy, ", ") + ")"
				}
				fmt.Fprintf(&b, "    %s: %s\n", f.Path, what)
			}
		}
	}
	if _, err := io.WriteString(out, b.String()); err != nil {
		return err
	}
	_, err := fmt.Fprintf(status, "%d of %d object(s) of %d plugin(s) drifted\n", changed, objects, len(drift))
	return err
}

// driftValue renders a JSON value compactly; an absent field is "(absent)".
func driftValue(v any) string {
	if v == nil {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
