package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/internal/suggest"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
)

// Streams are a command's standard streams.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// exitError carries an exit status without a message: the command already printed
// what went wrong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// errFailed is returned by commands that printed their diagnostics.
var errFailed = exitError{code: 1}

type options struct {
	// cfg is what every command's action shares. Commands make their action
	// with it when they are built, so that flags bind straight into the action;
	// PersistentPreRunE fills it from the global flags before any command runs.
	cfg        *action.Config
	streams    Streams
	output     string
	pluginDirs []string
	catalogs   []string
	contribDir string
	noBuiltin  bool
	// allowValuesOutside lets valuesFrom read outside the cluster file's directory.
	allowValuesOutside bool
	// locked is --locked of plan, render, apply and up; update their --update.
	locked  bool
	update  bool
	verbose int
	// quiet prints only errors and the final result.
	quiet bool
	// noProgress prints progress as plain lines even on a terminal.
	noProgress bool
	// errw is stderr for the logger, which prints above a live progress
	// display while one runs.
	errw   *errWriter
	getenv func(string) (string, bool)
	// expansions are --expansion-dir and its companions (plan, render, diff, apply, up).
	expansions action.ExpansionUse
}

// config returns the shared action configuration.
func (o *options) config() *action.Config { return o.cfg }

// initConfig fills the shared action configuration from the global flags.
func (o *options) initConfig() {
	if o.errw == nil {
		o.errw = &errWriter{w: o.streams.Err}
	}
	level := slog.LevelWarn
	switch {
	case o.verbose >= 2:
		level = slog.LevelDebug
	case o.verbose == 1:
		level = slog.LevelInfo
	}
	*o.cfg = action.Config{
		Logger:     slog.New(slog.NewTextHandler(o.errw, &slog.HandlerOptions{Level: level})),
		ContribDir: o.contribDir,
		PluginDirs: o.pluginDirs,
		Catalogs:   o.catalogs,
		NoBuiltin:  o.noBuiltin,
		Env:        o.getenv,

		AllowValuesOutside: o.allowValuesOutside,
		Locked:             o.locked,
		UpdateAll:          o.update,
		Expansions:         o.expansions,
	}
}

// withCluster loads the cluster file at path and runs f with the loaded spec:
// the file is the CLI's business, actions take the spec. The file's own
// diagnostics join f's, sorted. f does not run when the file is broken.
func withCluster[T any](path string, f func(*config.Cluster) (T, diag.List)) (T, diag.List) {
	cl, l := config.Load(path)
	if cl == nil {
		var zero T
		return zero, l
	}
	res, fl := f(cl)
	l = append(l, fl...)
	l.Sort()
	return res, l
}

// Main runs the kubeplug command line with args (without the program name) and
// returns the process's exit status.
func Main(ctx context.Context, args []string, streams Streams) int {
	return run(ctx, args, streams, os.LookupEnv)
}

// ControllerMain runs the command line of the controller's own binary
// (cmd/kubeplug-controller, the program of the controller's image): kubeplug
// with its global flags and only the controller and version verbs, so that it
// links neither the local provider nor a cloud SDK.
func ControllerMain(ctx context.Context, args []string, streams Streams) int {
	root := newRootWith(streams, os.LookupEnv, controllerVerbs)
	root.Short = "kubeplug's controller: installations, catalogs and fleets as Kubernetes resources"
	root.Long = `The program of kubeplug's controller image: the kubeplug command line with only
its controller and version verbs and its global flags. 'kubeplug controller'
runs the same controller; this binary links, of the providers, only hosts
(the clusters a ManagedCluster makes).`
	root.Example = `  kubeplug controller --leader-elect
  kubeplug controller manifests`
	return execute(ctx, root, args, streams)
}

func run(ctx context.Context, args []string, streams Streams, getenv func(string) (string, bool)) int {
	return execute(ctx, newRoot(streams, getenv), args, streams)
}

// execute runs root with args and returns the exit status.
func execute(ctx context.Context, cmd *cobra.Command, args []string, streams Streams) int {
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// The last line of defence: no URL's password reaches the terminal, whatever
	// the error came from.
	_, _ = fmt.Fprintln(streams.Err, "Error:", redact.URLError(err))
	return 1
}

// allVerbs are the kubeplug command line's verbs.
func allVerbs(o *options) []*cobra.Command {
	return []*cobra.Command{newVersionCmd(o), newPluginCmd(o), newConfigCmd(o), newPlanCmd(o), newRenderCmd(o), newDiffCmd(o), newNodeCmd(o), newApplyCmd(o), newUpCmd(o), newDownCmd(o), newGetKubeconfigCmd(o), newStatusCmd(o), newUninstallCmd(o), newHistoryCmd(o), newRollbackCmd(o), newDashboardCmd(o), newCatalogCmd(o), newLockCmd(o), newImageCmd(o), newControllerCmd(o),
		newExpansionCmd(o), newImportCmd(o), newEtcdCmd(o)}
}

// controllerVerbs are the verbs of the controller's binary (ControllerMain).
func controllerVerbs(o *options) []*cobra.Command {
	return []*cobra.Command{newVersionCmd(o), newControllerCmd(o)}
}

func newRoot(streams Streams, getenv func(string) (string, bool)) *cobra.Command {
	return newRootWith(streams, getenv, allVerbs)
}

func newRootWith(streams Streams, getenv func(string) (string, bool), verbs func(*options) []*cobra.Command) *cobra.Command {
	o := &options{cfg: &action.Config{}, streams: streams, getenv: getenv, errw: &errWriter{w: streams.Err}}
	if v, ok := getenv("KUBEPLUG_CONTRIB_DIR"); ok {
		o.contribDir = v
	}
	root := &cobra.Command{
		Use:   "kubeplug",
		Short: "Extend a Kubernetes cluster's whole lifecycle with versioned plugins",
		Long: `kubeplug makes a Kubernetes cluster's lifecycle pluggable. Plugins are versioned
packages that add to a cluster at every layer: machines (files, systemd units, node
hooks), the control plane (component flags), the cloud template, and the running
cluster (manifests, Helm charts).

Plugins come from, lowest precedence first: the built-in plugins, the contrib
directory (--contrib-dir or $KUBEPLUG_CONTRIB_DIR), user directories (--plugin-dir,
repeatable; a directory or a package archive), catalogs (--catalog URL of an
index.yaml or oci://HOST/PREFIX, repeatable) and the sources a cluster.yaml names under
spec.plugins.sources.`,
		Example: `  # Write a plugin and check it
  kubeplug plugin new demo && kubeplug plugin lint demo

  # See what a cluster file enables, with values resolved
  kubeplug config validate -f examples/quickstart/cluster.yaml
  kubeplug plugin list -f examples/quickstart/cluster.yaml -o json

  # Review what the plugins build, then deploy it to the cluster of your kubeconfig
  kubeplug plan -f examples/quickstart/cluster.yaml
  kubeplug render -f examples/quickstart/cluster.yaml --output-dir out
  kubeplug apply -f examples/quickstart/cluster.yaml --context dev`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	pf := root.PersistentFlags()
	pf.StringVarP(&o.output, "output", "o", "text", "output format: text, json, yaml, name or jsonpath=TEMPLATE (see docs/output.md)")
	pf.StringArrayVar(&o.pluginDirs, "plugin-dir", nil, "a directory of user plugins, or a plugin archive (repeatable)")
	pf.StringArrayVar(&o.catalogs, "catalog", nil, "a plugin catalog: the https:// URL of its index.yaml or an oci://HOST/PREFIX registry prefix (repeatable)")
	pf.StringVar(&o.contribDir, "contrib-dir", o.contribDir, "the contrib plugin directory (default $KUBEPLUG_CONTRIB_DIR)")
	pf.BoolVar(&o.noBuiltin, "no-builtin", false, "leave the built-in plugins out")
	pf.BoolVar(&o.allowValuesOutside, "allow-values-outside", false, "let valuesFrom read files outside the cluster file's directory")
	pf.CountVarP(&o.verbose, "verbose", "v", "log more: -v for kubeplug's progress details, -vv for its debugging, -vvv also for client-go's own logs")
	pf.BoolVarP(&o.quiet, "quiet", "q", false, "print only errors and the final result, no progress")
	pf.BoolVar(&o.noProgress, "no-progress", false, "print progress as plain lines, one per event, never as a live display (also when stderr is no terminal, $CI is set, TERM=dumb or $KUBEPLUG_PROGRESS=plain)")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp|cobra.ShellCompDirectiveNoSpace))
	_ = root.MarkPersistentFlagDirname("plugin-dir")
	_ = root.MarkPersistentFlagDirname("contrib-dir")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		o.initConfig()
		// client-go logs through klog to stderr: an API server restarting would
		// flood the output with discovery retries that kubeplug reports itself.
		// They are debugging output, below kubeplug's own (-vvv).
		if o.verbose >= 3 {
			klog.SetSlogLogger(o.config().Logger)
		} else {
			klog.SetLogger(logr.Discard())
		}
		if err := checkFlags(cmd); err != nil {
			return err
		}
		return checkOutput(o.output, cmd.Name())
	}
	root.AddCommand(verbs(o)...)
	rejectUnknownSubcommands(root)
	registerCompletions(root)
	return root
}

// rejectUnknownSubcommands makes every command that only groups subcommands
// (root, plugin, config, node) fail on an argument that names none of them,
// with a suggestion, instead of printing its help and exiting 0 as cobra does
// for a group below the root. Without arguments a group still prints its help.
func rejectUnknownSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		rejectUnknownSubcommands(c)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.DisableFlagsInUseLine = true // the usage is "kubeplug plugin [command]"
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return unknownCommand(cmd, args[0])
	}
	// "kubeplug config valdate -f x" fails on -f, a flag of the subcommand
	// meant, before RunE: the mistyped name, parsed already, is the real error.
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if args := cmd.Flags().Args(); len(args) > 0 {
			return unknownCommand(cmd, args[0])
		}
		return err
	})
}

// unknownCommand is the error for name, which names no subcommand of group,
// with the closest subcommands' names as suggestions; a command that kind,
// Helm or kubectl users type by habit (habits) gets what kubeplug does instead.
func unknownCommand(group *cobra.Command, name string) error {
	var known []string
	for _, c := range group.Commands() {
		if c.IsAvailableCommand() {
			known = append(known, c.Name())
		}
	}
	if h, ok := habits[name]; ok && !group.HasParent() {
		return fmt.Errorf("unknown command %q for %q: %s", name, group.CommandPath(), h)
	}
	return fmt.Errorf("unknown command %q for %q%s", name, group.CommandPath(), suggest.Hint(suggest.Closest(name, known)))
}

// report prints diagnostics to stderr and says whether any was fatal.
func (o *options) report(l diag.List) bool {
	for _, d := range l {
		_, _ = fmt.Fprintln(o.streams.Err, d.String())
	}
	return l.HasFatal()
}

// lockedFlag adds --locked and --update to a command that plans a cluster.
func lockedFlag(cmd *cobra.Command, o *options) {
	cmd.Flags().BoolVar(&o.locked, "locked", false, "fail when the plan would change kubeplug.lock beside the cluster file (or there is none): for CI")
	cmd.Flags().BoolVar(&o.update, "update", false, "take the newest plugin versions the cluster file allows rather than those kubeplug.lock pins (a successful apply or up then pins them)")
	cmd.MarkFlagsMutuallyExclusive("locked", "update")
}
