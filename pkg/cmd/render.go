package cmd

import (
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

func newRenderCmd(o *options) *cobra.Command {
	var file, dir, until string
	cmd := &cobra.Command{
		Use:   "render -f cluster.yaml (--output-dir DIR | -o json|yaml)",
		Short: "Render the cluster's reviewable files into a directory, or print them",
		Long: `Resolve the cluster's plugins, run the initialise and render stages, and write the
cluster as files you can review and keep in version control:

  plan.json                      resolved plugins, versions, digests, waves, contributions
  control-plane/*.yaml           static Pods for kube-apiserver, -controller-manager, -scheduler
  nodes/POOL/cloud-init.yaml     per node pool: files, systemd units, kubelet flags, node hooks
  nodes/POOL/ignition.json       the same as an Ignition v3 config
  cloud/template.json            the cloud template with the plugins' resources and patches
  kubernetes/NN-PLUGIN.yaml      each plugin's manifests and rendered Helm charts, in deploy order

With --stage initialise, writes the model the plugins built (model.json) and
plan.json instead. Output is byte-for-byte deterministic. --output-dir DIR is
replaced atomically, and only if it is empty or a previous render; on any error
it is left as it was. With -o json or -o yaml nothing is written: the files are
printed as one document (kind RenderedFiles: each file's path and content, in
path order). Sensitive values are written as ***.`,
		Example: `  kubeplug render -f examples/quickstart/cluster.yaml --output-dir out
  kubeplug render -f examples/quickstart/cluster.yaml --output-dir model --stage initialise
  kubeplug render -f examples/quickstart/cluster.yaml -o json | jq -r '.files[].path'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a := action.NewRender(o.cfg)
			switch until {
			case "render":
			case "initialise", "initialize":
				a.Stage = stage.Initialise
			default:
				return fmt.Errorf("invalid --stage %q: expected initialise or render", until)
			}
			if o.output != "text" {
				if dir != "" {
					return fmt.Errorf("give either --output-dir (files) or -o %s (one document on stdout), not both", o.output)
				}
				files, l := withCluster(file, func(cl *config.Cluster) (map[string][]byte, diag.List) { return a.Files(cmd.Context(), cl) })
				if o.report(l) {
					return errFailed
				}
				return o.print(renderedFiles(files), nil)
			}
			if dir == "" {
				return fmt.Errorf("render needs --output-dir DIR to write the files into, or -o json|yaml to print them")
			}
			_, l := withCluster(file, func(cl *config.Cluster) (struct{}, diag.List) { return struct{}{}, a.Run(cmd.Context(), cl, dir) })
			if o.report(l) {
				return errFailed
			}
			_, err := fmt.Fprintf(o.streams.Err, "rendered %s into %s\n", file, dir)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	clusterFileArg(cmd)
	lockedFlag(cmd, o)
	expansionFlags(cmd, o)
	cmd.Flags().StringVar(&dir, "output-dir", "", "the directory to write the files into")
	cmd.Flags().StringVar(&until, "stage", "render", "what to write: render (every file) or initialise (the model)")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	_ = cmd.MarkFlagDirname("output-dir")
	_ = cmd.RegisterFlagCompletionFunc("stage", cobra.FixedCompletions([]string{"render", "initialise"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// RenderedFiles is render's -o json|yaml document: every file, in path order.
type RenderedFiles struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Files      []RenderedFile `json:"files"`
}

// RenderedFile is one rendered file.
type RenderedFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func renderedFiles(files map[string][]byte) RenderedFiles {
	out := RenderedFiles{APIVersion: APIVersion, Kind: "RenderedFiles", Files: []RenderedFile{}}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		out.Files = append(out.Files, RenderedFile{Path: p, Content: string(files[p])})
	}
	return out
}
