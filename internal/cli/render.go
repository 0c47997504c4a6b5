package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/engine"
)

func newRenderCmd(o *options) *cobra.Command {
	var file, dir, stage string
	cmd := &cobra.Command{
		Use:   "render -f cluster.yaml -o DIR",
		Short: "Render the cluster's reviewable files into a directory",
		Long: `Resolve the cluster's plugins, run the initialise and render stages, and write the
cluster as files you can review and keep in version control:

  plan.json                      resolved plugins, versions, digests, waves, contributions
  control-plane/*.yaml           static Pods for kube-apiserver, -controller-manager, -scheduler
  nodes/POOL/cloud-init.yaml     per node pool: files, systemd units, kubelet flags, node hooks
  nodes/POOL/ignition.json       the same as an Ignition v3 config
  cloud/template.json            the cloud template with the plugins' resources and patches
  kubernetes/NN-PLUGIN.yaml      each plugin's manifests and rendered Helm charts, in deploy order

With --stage initialise, writes the model the plugins built (model.json) and
plan.json instead. Output is byte-for-byte deterministic. DIR is replaced atomically,
and only if it is empty or a previous render; on any error it is left as it was.
Sensitive values are written as ***.`,
		Example: `  kubeplug render -f examples/quickstart/cluster.yaml -o out
  kubeplug render -f examples/quickstart/cluster.yaml -o model --stage initialise`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a := action.NewRender(o.config())
			switch stage {
			case "render":
			case "initialise", "initialize":
				a.Stage = engine.Initialise
			default:
				return fmt.Errorf("invalid --stage %q: expected initialise or render", stage)
			}
			if o.report(a.Run(cmd.Context(), file, dir)) {
				return errFailed
			}
			_, err := fmt.Fprintf(o.streams.Err, "rendered %s into %s\n", file, dir)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	// Here -o names the output directory, as in kustomize build -o: render writes
	// files, not a report in a format.
	cmd.Flags().StringVarP(&dir, "output", "o", "", "the directory to write (required)")
	cmd.Flags().StringVar(&stage, "stage", "render", "what to write: render (every file) or initialise (the model)")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagRequired("output")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	_ = cmd.MarkFlagDirname("output")
	_ = cmd.RegisterFlagCompletionFunc("stage", cobra.FixedCompletions([]string{"render", "initialise"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func newDiffCmd(o *options) *cobra.Command {
	var file, dir string
	var exitCode bool
	cmd := &cobra.Command{
		Use:   "diff -f cluster.yaml --against DIR",
		Short: "Show what a re-render would change in a rendered directory",
		Long: `Render the cluster in memory and print a unified diff against DIR, a previous
'kubeplug render'. Nothing is written. Sensitive values are *** on both sides.
With --exit-code, exit 2 when there are differences (for CI drift checks).`,
		Example: `  kubeplug diff -f examples/quickstart/cluster.yaml --against out`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			text, l := action.NewDiff(o.config()).Run(cmd.Context(), file, dir)
			if o.report(l) {
				return errFailed
			}
			if _, err := io.WriteString(o.streams.Out, text); err != nil {
				return err
			}
			if exitCode && text != "" {
				return exitError{code: 2}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	cmd.Flags().StringVar(&dir, "against", "", "a previous render to compare with (required)")
	cmd.Flags().BoolVar(&exitCode, "exit-code", false, "exit 2 when there are differences")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagRequired("against")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	_ = cmd.MarkFlagDirname("against")
	return cmd
}
