package cmd

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

func newEtcdCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Back up a cluster's etcd",
		Long: `Work on the etcd of a running cluster. "kubeplug etcd snapshot" writes a
snapshot; "kubeplug up --restore-from FILE" brings the cluster back from it
(docs/ha.md).`,
	}
	cmd.AddCommand(newEtcdSnapshotCmd(o))
	return cmd
}

func newEtcdSnapshotCmd(o *options) *cobra.Command {
	var file string
	a := action.NewEtcdSnapshot(o.cfg)
	cmd := &cobra.Command{
		Use:   "snapshot -f cluster.yaml --to FILE",
		Short: "Write a verified snapshot of a running cluster's etcd",
		Long: `Write a snapshot of the running cluster's etcd to FILE, through etcd's
Maintenance API: every object of the cluster at one revision, the plugins'
release records included. etcd's checksum is verified before FILE is written,
and FILE is replaced only once complete.

FILE starts with a header naming the cluster (its name and its CA's
fingerprint) and giving the size and sha256 of the etcd data after it, and
carries the cluster's CA and service-account keys: "kubeplug up
--restore-from FILE" refuses a snapshot that is truncated, corrupt or of
another cluster, and a restore after "kubeplug down --purge" brings back a
cluster whose kubeconfigs and service-account tokens still work. FILE holds
every Secret of the cluster and its CA keys: it is written readable by its
owner only; keep it as you keep those.`,
		Example: `  kubeplug etcd snapshot -f cluster.yaml --to demo.snapshot
  kubeplug down -f cluster.yaml --purge
  kubeplug up -f cluster.yaml --restore-from demo.snapshot`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output == "text" {
				pr := newProgress(o)
				a.ProviderEvents = pr.providerEvent
				defer pr.close()
			}
			res, l := withCluster(file, func(cl *config.Cluster) (*provider.EtcdSnapshot, diag.List) { return a.Run(cmd.Context(), cl) })
			if o.report(l) || res == nil {
				return errFailed
			}
			return o.print(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "snapshot of cluster %s written to %s in %s: revision %d, %d keys, %d bytes, sha256 %s\n",
					res.Cluster, res.File, res.Duration.Round(time.Millisecond), res.Revision, res.Keys, res.Size, res.SHA256)
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the cluster file (required)")
	clusterFileArg(cmd)
	cmd.Flags().StringVar(&a.Output, "to", "", "the snapshot file to write (required; -o is the output format, as for every command)")
	stateDirFlag(cmd, &a.StateDir)
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagRequired("to")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}
