package cmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/internal/plangraph"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

func newPlanCmd(o *options) *cobra.Command {
	var file, kube, stateDir, graph string
	var cloud bool
	cmd := &cobra.Command{
		Use:   "plan -f cluster.yaml [--kubernetes-version V | --cloud]",
		Short: "Show which plugins run, in which waves, and what each contributes",
		Long: `Resolve the cluster file's plugins — versions, dependencies, conflicts, the
Kubernetes version, ordering hints and the order list — into waves (plugins of one
wave run in parallel; every dependency is in an earlier wave), run the initialise
stage, and list every construct with the plugin that contributed it. Nothing is
written and nothing is deployed. Sensitive values are shown as ***.

With a kubeplug.lock beside the cluster file, every plugin resolves to the
version the lock pins (see kubeplug lock's help); the table then shows the
LOCKED version and a NEWER one the file's constraints allow, held back until
'kubeplug lock --update NAME' (or --update here) takes it, and plan lists how
the lock would change when it does not pin the plan (a plugin enabled or dropped
since, a constraint that no longer admits the locked version).

Helm charts that releases name by reference (oci://… or a Helm repository's
chart) are resolved and fetched (into the cache) before the plan is shown, and
listed under "Charts by reference" with the version and archive digest the lock
pins (docs/helm.md).

With --kubernetes-version, plan a Kubernetes upgrade instead: resolve the plugins
at the file's spec.kubernetesVersion and at the target, and show per plugin the
version selected now and at the target, and whether it must move (its current
version's spec.kubernetesVersion excludes the target), may move (it supports the
target, but a newer version is selected there), stays, is added (a new
requirement) or is removed. When no selection resolves at the target, the
blocked plugins are listed with every version and the Kubernetes versions it
needs, and the command exits 1. Only the resolver runs.

With --cloud, on a provider that deploys to a cloud (spec.provider.aws), render
the cluster and show per stack what 'kubeplug up' would change: for a stack that
exists, the changes of a CloudFormation change set created for the plan and
deleted right after; for one that does not exist yet, every resource of its
template as an Add. Nothing is deployed or uploaded (docs/aws.md).

With --graph FILE.svg or --graph FILE.dot, plan also writes the plan's
dependency graph to FILE: one column per wave, a box per plugin (dashed when
only another plugin requires it) and an arrow from each plugin to every plugin
that waits for it. .svg is a picture drawn by kubeplug itself (no Graphviz
needed); .dot is the same graph for Graphviz (docs/dashboard.md).`,
		Example: `  kubeplug plan -f examples/quickstart/cluster.yaml
  kubeplug plan -f examples/quickstart/cluster.yaml -o json | jq '.waves'
  kubeplug plan -f examples/quickstart/cluster.yaml --graph plan.svg
  kubeplug plan -f cluster.yaml --kubernetes-version 1.38.0
  kubeplug plan -f cluster.yaml --kubernetes-version 1.38.0 -o json | jq '.plugins[] | select(.move=="must")'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kube != "" {
				return planUpgrade(cmd, o, file, kube)
			}
			if cloud {
				return planCloud(cmd, o, file, stateDir)
			}
			return runPlan(cmd, o, file, graph)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	clusterFileArg(cmd)
	lockedFlag(cmd, o)
	expansionFlags(cmd, o)
	cmd.Flags().StringVar(&kube, "kubernetes-version", "", "plan moving the cluster to this Kubernetes version: which plugins must move")
	cmd.Flags().BoolVar(&cloud, "cloud", false, "show what up would change in the cloud's stacks (the aws provider's change sets)")
	cmd.Flags().StringVar(&graph, "graph", "", "also write the plan's dependency graph to this file: FILE.svg (a picture) or FILE.dot (Graphviz)")
	stateDirFlag(cmd, &stateDir)
	cmd.MarkFlagsMutuallyExclusive("kubernetes-version", "cloud", "graph")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}

// runPlan prints the plan of the cluster file: its waves and what each plugin
// contributes (plan, and up --dry-run). With graph, it also writes the plan's
// graph there (plangraph.Write).
func runPlan(cmd *cobra.Command, o *options, file, graph string) error {
	if graph != "" {
		if err := plangraph.CheckPath(graph); err != nil {
			return fmt.Errorf("invalid --graph: %w", err)
		}
	}
	doc, l := withCluster(file, func(cl *config.Cluster) (*engine.PlanDoc, diag.List) {
		return action.NewPlan(o.cfg).Run(cmd.Context(), cl)
	})
	if o.report(l) {
		return errFailed
	}
	if graph != "" {
		if err := plangraph.Write(graph, doc); err != nil {
			return err
		}
	}
	return o.print(doc, func(w io.Writer) error {
		var b strings.Builder
		fmt.Fprintf(&b, "Cluster %s, Kubernetes %s\n\n", doc.Cluster, doc.KubernetesVersion)
		rows := make([][]string, 0, len(doc.Plugins))
		head := []string{"WAVE", "PLUGIN", "VERSION", "ORIGIN", "WHY", "DIGEST"}
		if doc.Lock != nil {
			head = append(head, "LOCKED", "NEWER")
		}
		for _, p := range doc.Plugins {
			how := "enabled"
			if !p.Enabled {
				how = "required"
			}
			row := []string{fmt.Sprint(p.Wave), p.Name, p.Version, p.Origin, how, shortDigest(p.Digest)}
			if doc.Lock != nil {
				row = append(row, dash(p.Locked), dash(p.Newer))
			}
			rows = append(rows, row)
		}
		if err := table(&b, head, rows); err != nil {
			return err
		}
		var less []string
		for _, p := range doc.Plugins {
			if p.LessTested {
				less = append(less, p.Name)
			}
		}
		if len(less) > 0 {
			fmt.Fprintf(&b, "\n%s\n", lessTestedNote(less))
		}
		lockNotes(&b, doc, file)
		b.WriteString("\nContributions:\n")
		crow := make([][]string, 0, len(doc.Contributions))
		for _, c := range doc.Contributions {
			crow = append(crow, []string{"  " + c.Plugin, c.Kind, c.Key})
		}
		if err := table(&b, []string{"  PLUGIN", "KIND", "KEY"}, crow); err != nil {
			return err
		}
		chartNotes(&b, doc)
		expansionNotes(&b, doc)
		_, err := io.WriteString(w, b.String())
		return err
	})
}

// lessTestedNote says that the plugins names, of the contrib directory, are
// tested less than the built-in ones.
func lessTestedNote(names []string) string {
	return "less tested: " + strings.Join(names, ", ") + " (contrib: contributed plugins are tested less than the built-in ones)"
}

// planCloud prints, per stack, what up would change in the cloud.
func planCloud(cmd *cobra.Command, o *options, file, stateDir string) error {
	a := action.NewCloudPlan(o.cfg)
	a.StateDir = stateDir
	res, l := withCluster(file, func(cl *config.Cluster) ([]provider.StackPreview, diag.List) { return a.Run(cmd.Context(), cl) })
	if o.report(l) {
		return errFailed
	}
	return o.print(res, func(w io.Writer) error {
		var b strings.Builder
		for _, s := range res {
			what := "exists"
			if !s.Exists {
				what = "to be created"
			}
			fmt.Fprintf(&b, "stack %s (%s):", s.Stack, what)
			switch {
			case s.Note != "":
				fmt.Fprintf(&b, " %s\n", s.Note)
			case len(s.Changes) == 0:
				b.WriteString(" no changes\n")
			default:
				b.WriteString("\n")
				for _, c := range s.Changes {
					fmt.Fprintf(&b, "  %s\n", c)
				}
			}
		}
		_, err := io.WriteString(w, b.String())
		return err
	})
}

func planUpgrade(cmd *cobra.Command, o *options, file, kube string) error {
	target, err := semver.StrictNewVersion(strings.TrimPrefix(kube, "v"))
	if err != nil {
		return fmt.Errorf("invalid --kubernetes-version %q: expected a version such as 1.38.0", kube)
	}
	up, l := withCluster(file, func(cl *config.Cluster) (*action.KubernetesUpgrade, diag.List) {
		return action.NewPlan(o.cfg).Upgrade(cmd.Context(), cl, target)
	})
	if up == nil {
		o.report(l)
		return errFailed
	}
	err = o.print(up, func(w io.Writer) error {
		var b strings.Builder
		fmt.Fprintf(&b, "Cluster %s, Kubernetes %s -> %s\n\n", up.Cluster, up.From, up.To)
		rows := make([][]string, 0, len(up.Plugins))
		for _, p := range up.Plugins {
			rows = append(rows, []string{p.Plugin, dash(p.Current), dash(p.Target), string(p.Move), dash(p.Supports)})
		}
		if err := table(&b, []string{"PLUGIN", "CURRENT", "TARGET", "MOVE", "CURRENT SUPPORTS"}, rows); err != nil {
			return err
		}
		for _, p := range up.Plugins {
			if p.Move == action.MoveBlocked {
				fmt.Fprintf(&b, "\n%s: no version supports Kubernetes %s; available: %s\n", p.Plugin, up.To, strings.Join(p.Available, ", "))
			}
		}
		_, err := io.WriteString(w, b.String())
		return err
	})
	if o.report(l) && err == nil {
		err = errFailed
	}
	return err
}

// lockNotes says, under plan's table, which newer versions the lock holds
// back and how to take them, and how the lock would change to pin the plan.
func lockNotes(b *strings.Builder, doc *engine.PlanDoc, file string) {
	if doc.Lock == nil {
		return
	}
	var newer, names []string
	for _, p := range doc.Plugins {
		if p.Newer != "" {
			newer = append(newer, fmt.Sprintf("%s %s (locked %s)", p.Name, p.Newer, p.Version))
			names = append(names, p.Name)
		}
	}
	if len(newer) > 0 {
		fmt.Fprintf(b, "\nNewer available, held back by %s: %s.\nTake them with: kubeplug lock -f %s --update %s\n", doc.Lock.File, strings.Join(newer, ", "), file, strings.Join(names, " "))
	}
	if len(doc.Lock.Changes) > 0 {
		fmt.Fprintf(b, "\n%s does not pin this plan; a successful apply or up, or kubeplug lock, updates it:\n", doc.Lock.File)
		for _, c := range doc.Lock.Changes {
			fmt.Fprintf(b, "  %s\n", c)
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// chartNotes lists the charts by reference of the plan's Helm releases, as
// they resolved: plugin, chart, version and archive digest.
func chartNotes(b *strings.Builder, doc *engine.PlanDoc) {
	var rows [][]string
	for _, p := range doc.Plugins {
		for _, c := range p.Charts {
			rows = append(rows, []string{"  " + p.Name, c.Chart, c.Version, shortDigest(c.Digest)})
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nCharts by reference:\n")
	_ = table(b, []string{"  PLUGIN", "CHART", "VERSION", "DIGEST"}, rows)
}

// expansionNotes lists what the expansions in use do besides their plugins:
// their installer hooks with the step each runs at, and what they skip or
// delegate.
func expansionNotes(b *strings.Builder, doc *engine.PlanDoc) {
	x := doc.Expansions
	if x == nil {
		return
	}
	fmt.Fprintf(b, "\nExpansions: %s\n", strings.Join(x.Used, ", "))
	if len(x.Hooks) > 0 {
		b.WriteString("\nInstaller hooks:\n")
		rows := make([][]string, 0, len(x.Hooks))
		for _, h := range x.Hooks {
			rows = append(rows, []string{"  " + h.Expansion, h.Name, h.At, h.Step, h.Run})
		}
		_ = table(b, []string{"  EXPANSION", "HOOK", "AT", "STEP", "RUNS"}, rows)
	}
	if len(x.Skipped) > 0 {
		b.WriteString("\nSkipped and delegated:\n")
		rows := make([][]string, 0, len(x.Skipped))
		for _, s := range x.Skipped {
			rows = append(rows, []string{"  " + s.Expansion, s.What, s.Name, dash(s.To)})
		}
		_ = table(b, []string{"  EXPANSION", "WHAT", "NAME", "DELEGATED TO"}, rows)
	}
}
