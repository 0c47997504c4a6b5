package cmd

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

func newPluginCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "plugin",
		Aliases: []string{"plugins"},
		Short:   "List, inspect, check, scaffold, test, package, sign, push and pull plugins",
	}
	cmd.AddCommand(newPluginListCmd(o), newPluginShowCmd(o), newPluginLintCmd(o), newPluginNewCmd(o), newPluginPackageCmd(o),
		newPluginTestCmd(o), newPluginKeygenCmd(o), newPluginSignCmd(o), newPluginVerifyCmd(o), newPluginPushCmd(o), newPluginPullCmd(o))
	return cmd
}

// optionalCluster loads the cluster file at path when one is given: nil, nil
// without one; a nil spec and fatal diagnostics when it is broken.
func optionalCluster(path string) (*config.Cluster, diag.List) {
	if path == "" {
		return nil, nil
	}
	return config.Load(path)
}

func newPluginListCmd(o *options) *cobra.Command {
	var file string
	a := action.NewList(o.cfg)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the plugins every source offers",
		Long: `List every plugin version found in the built-in plugins, the contrib directory and
the user directories, with its origin and package digest. Plugins shadowed by a
higher-precedence origin are left out and reported as warnings on stderr.

With -f, the cluster file's own sources are searched too and the ENABLED column marks
the version the cluster's constraint selects.`,
		Example: `  kubeplug plugin list
  kubeplug plugin list --plugin-dir ./plugins -o json
  kubeplug plugin list -f examples/quickstart/cluster.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, l := optionalCluster(file)
			var infos []action.PluginInfo
			if !l.HasFatal() {
				a.Cluster = cl
				var rl diag.List
				infos, rl = a.Run(cmd.Context())
				l = append(l, rl...)
				l.Sort()
			}
			failed := o.report(l)
			if infos == nil && failed {
				return errFailed
			}
			if infos == nil {
				infos = []action.PluginInfo{}
			}
			err := o.print(infos, func(w io.Writer) error {
				header := []string{"NAME", "VERSION", "ORIGIN", "DIGEST", "LOCATION"}
				if file != "" {
					header = append(header, "ENABLED")
				}
				rows := make([][]string, 0, len(infos))
				for _, p := range infos {
					r := []string{p.Name, p.Version, p.Origin, shortDigest(p.Digest), p.Location}
					if file != "" {
						r = append(r, map[bool]string{true: "yes", false: ""}[p.Enabled])
					}
					rows = append(rows, r)
				}
				return table(w, header, rows)
			})
			if err != nil {
				return err
			}
			if failed {
				return errFailed
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "a cluster.yaml whose sources and enabled plugins to include")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}

func newPluginShowCmd(o *options) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "show NAME[@VERSION]",
		Short: "Show a plugin's manifest, origin, digest and effective values",
		Long: `Show one plugin: where it comes from, its digest, its manifest and its effective
values. VERSION may be an exact version or a constraint; the newest match wins.
Without -f the values are the plugin's defaults; with -f they are the values the
cluster file gives it, merged over the defaults. Sensitive values are shown as ***.`,
		Example: `  kubeplug plugin show metrics-server
  kubeplug plugin show hello@^0.1 -f examples/quickstart/cluster.yaml -o yaml`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			o.initConfig() // completion runs no PersistentPreRunE
			a := action.NewList(o.cfg)
			a.Cluster, _ = optionalCluster(file)
			infos, _ := a.Run(cmd.Context())
			var names []string
			for _, p := range infos {
				names = append(names, p.Name)
			}
			return slices.Compact(names), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			a := action.NewShow(o.cfg)
			cl, l := optionalCluster(file)
			var d *action.PluginDetail
			if !l.HasFatal() {
				a.Cluster = cl
				var rl diag.List
				d, rl = a.Run(cmd.Context(), args[0])
				l = append(l, rl...)
				l.Sort()
			}
			if o.report(l) {
				return errFailed
			}
			return o.print(d, func(w io.Writer) error { return showText(w, d) })
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "a cluster.yaml whose values for the plugin to show")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}

func showText(w io.Writer, d *action.PluginDetail) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Name:         %s\n", d.Name)
	fmt.Fprintf(&b, "Version:      %s\n", d.Version)
	if d.Description != "" {
		fmt.Fprintf(&b, "Description:  %s\n", d.Description)
	}
	fmt.Fprintf(&b, "Origin:       %s\n", d.Origin)
	fmt.Fprintf(&b, "Location:     %s\n", d.Location)
	fmt.Fprintf(&b, "Digest:       %s\n", d.Digest)
	s := d.Manifest.Spec
	if s.KubernetesVersion != "" {
		fmt.Fprintf(&b, "Kubernetes:   %s\n", s.KubernetesVersion)
	}
	for _, r := range s.Requires {
		fmt.Fprintf(&b, "Requires:     %s %s\n", r.Name, r.Version)
	}
	for _, sh := range d.Shadowed {
		fmt.Fprintf(&b, "Shadows:      %s\n", sh)
	}
	vals, err := yaml.Marshal(d.Values)
	if err != nil {
		return fmt.Errorf("render values: %w", err)
	}
	fmt.Fprintf(&b, "Values:\n%s", indent(string(vals)))
	for _, pool := range slices.Sorted(maps.Keys(d.PoolValues)) {
		pv, err := yaml.Marshal(d.PoolValues[pool])
		if err != nil {
			return fmt.Errorf("render values: %w", err)
		}
		fmt.Fprintf(&b, "Values on node pool %s:\n%s", pool, indent(string(pv)))
	}
	_, err = io.WriteString(w, b.String())
	return err
}

func indent(s string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "")
}

type lintResult struct {
	Packages    int       `json:"packages"`
	Diagnostics diag.List `json:"diagnostics"`
}

func newPluginLintCmd(o *options) *cobra.Command {
	a := action.NewLint(o.config())
	cmd := &cobra.Command{
		Use:   "lint DIR...",
		Short: "Check plugin packages and report every problem",
		Long: `Check plugin packages: plugin.yaml against its schema, versions and constraints,
every file it refers to, the values schema and defaults, symlinks and file sizes.
Each package is rendered with its default values, as 'kubeplug render' would, and
a template that refers to a value the plugin does not declare (no default, no
schema property) is a warning naming the value it probably meant.

Every rendered object (manifests and chart output) is validated against its
kind's schema, at the file and line that wrote each field: unknown fields (with
the name probably meant), values of the wrong type, kinds that do not exist.
Offline the schemas are the built-in kinds of this kubeplug's Kubernetes version
and the CustomResourceDefinitions the plugin ships; another kind is an info
line. --live (or an explicit --kubeconfig, --context or --server) validates
against the cluster's OpenAPI v3 schemas instead, which cover its CRDs; without
them lint never contacts a cluster.

Each DIR is a package (it holds plugin.yaml), a tree of packages, or a package
archive written by 'plugin package'. See docs/lint.md.

Every problem is printed, one per line, as FILE:LINE:COL: field.path: message.
The exit status is 0 when every package is valid (warnings alone do not fail)
and 1 otherwise.`,
		Example: `  kubeplug plugin lint ./my-plugin
  kubeplug plugin lint ./plugins -o json
  kubeplug plugin lint ./my-plugin --live --context prod`,
		Args: cobra.MinimumNArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			n, l := a.Run(cmd.Context(), args...)
			if l == nil {
				l = diag.List{}
			}
			err := o.print(lintResult{Packages: n, Diagnostics: l}, func(w io.Writer) error {
				for _, d := range l {
					if _, err := fmt.Fprintln(w, d.String()); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			if l.HasFatal() {
				return errFailed
			}
			if o.output == "text" {
				_, _ = fmt.Fprintf(o.streams.Err, "%d plugin(s) checked, no problems\n", n)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&a.Live, "live", false, "validate the rendered objects against the cluster's OpenAPI v3 schemas (its CRDs included) instead of the built-in ones")
	targetFlags(cmd, &a.Target)
	return cmd
}

func newPluginNewCmd(o *options) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "new NAME",
		Short: "Scaffold a plugin package that lints clean",
		Long: `Create NAME/ with a commented plugin.yaml, a values schema and a manifest: a valid
starting point that 'kubeplug plugin lint NAME' accepts. Existing paths are never
overwritten.`,
		Example: `  kubeplug plugin new demo && kubeplug plugin lint demo`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := action.NewNew()
			a.Dir = dir
			path, err := a.Run(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.print(map[string]string{"path": path}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "created plugin %s in %s\nnext: kubeplug plugin lint %s\n", args[0], path, path)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the directory to create the plugin in (default: the working directory)")
	_ = cmd.MarkFlagDirname("dir")
	return cmd
}
