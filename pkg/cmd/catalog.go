package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/source"
)

func newCatalogCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Build plugin catalogs",
		Long: `A catalog is a set of package archives (written by 'plugin package') served over
HTTPS with an index.yaml that lists every version: name, version, description,
kubernetesVersion, requires, conflicts, after, before, package digest and URL.
The resolver picks versions from the index alone and downloads only the archives
it picked; a downloaded package must agree with its index entry (digest and every
field the resolver read), or it is refused naming both.

Use a catalog with --catalog URL or in cluster.yaml:

  spec:
    plugins:
      sources:
      - catalog: https://plugins.example.com/index.yaml
      - catalog: oci://registry.example.com/kubeplug

An OCI catalog is a registry prefix: each plugin the repository PREFIX/NAME, tagged by
version ('plugin push' puts it there), and an index artifact tagged 'index' in
PREFIX, which 'plugin push' keeps up to date.

Downloads are kept by digest under the user's cache directory and checked on every
use. Plain http is accepted for loopback addresses only.`,
	}
	cmd.AddCommand(newCatalogIndexCmd(o))
	return cmd
}

func newCatalogIndexCmd(o *options) *cobra.Command {
	a := action.NewCatalogIndex(nil)
	var (
		rf    registryFlags
		push  bool
		names []string
	)
	cmd := &cobra.Command{
		Use:   "index DIR|oci://HOST/PREFIX",
		Short: "Write the index.yaml of the package archives in DIR",
		Long: `Check every package archive (*.tgz) in DIR and below it, as 'plugin lint' does, and
write the catalog index: entries by name, newest first, each with its package
digest and its URL relative to the index (or below --url). The same name and
version twice is an error naming both archives; nothing is written on any error.

For an OCI catalog the index is rebuilt from the registry: every version tag of every
plugin the current index artifact names (and each --plugin), each pulled and checked,
without the registry's _catalog. -o writes it to a file; --push replaces the index
artifact with it (to repair an index that lost an entry when two pushes raced).`,
		Example: `  kubeplug plugin package ./demo -o dist/demo-0.1.0.tgz
  kubeplug catalog index dist -o dist/index.yaml
  kubeplug plugin list --catalog https://plugins.example.com/index.yaml
  kubeplug catalog index oci://registry.example.com/kubeplug -o index.yaml
  kubeplug catalog index oci://registry.example.com/kubeplug --plugin demo --push`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.HasPrefix(args[0], oci.Scheme) {
				return ociCatalogIndex(cmd.Context(), o, &rf, args[0], a.Output, push, names)
			}
			run := action.NewCatalogIndex(o.config())
			run.Output, run.BaseURL = a.Output, a.BaseURL
			x, file, l := run.Run(cmd.Context(), args[0])
			if o.report(l) || x == nil {
				return errFailed
			}
			n := 0
			for _, es := range x.Entries {
				n += len(es)
			}
			return o.print(map[string]any{"file": file, "plugins": len(x.Entries), "versions": n}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "wrote %s: %d plugin(s), %d version(s)\n", file, len(x.Entries), n)
				return err
			})
		},
	}
	// -o names the file here, as it names the directory for render.
	cmd.Flags().StringVarP(&a.Output, "output", "o", "", "the index to write (default: DIR/index.yaml); a .json name writes JSON, which large catalogs decode several times faster")
	cmd.Flags().StringVar(&a.BaseURL, "url", "", "the URL the archives are served under (default: URLs relative to the index)")
	_ = cmd.MarkFlagFilename("output", "yaml")
	cmd.Flags().BoolVar(&push, "push", false, "for an oci:// catalog: replace its index artifact with the rebuilt index")
	cmd.Flags().StringArrayVar(&names, "plugin", nil, "for an oci:// catalog: a plugin repository to include besides those the index names (repeatable)")
	rf.add(cmd.Flags())
	return cmd
}

// ociCatalogIndex rebuilds an OCI catalog's index and writes it to output, pushes it,
// or both.
func ociCatalogIndex(ctx context.Context, o *options, rf *registryFlags, prefix, output string, push bool, names []string) error {
	if output == "" && !push {
		return errors.New("an oci:// catalog needs -o FILE, --push or both")
	}
	c, err := rf.client(o.streams.In)
	if err != nil {
		return err
	}
	x, err := source.RebuildOCIIndex(ctx, c, prefix, names)
	if err != nil {
		return err
	}
	n := 0
	for _, es := range x.Entries {
		n += len(es)
	}
	js, err := json.Marshal(x)
	if err != nil {
		return err
	}
	if output != "" {
		data := js
		if !strings.HasSuffix(output, ".json") {
			if data, err = yaml.Marshal(x); err != nil {
				return err
			}
		}
		if err := os.WriteFile(output, data, 0o644); err != nil {
			return fmt.Errorf("cannot write the index: %w", err)
		}
	}
	if push {
		if _, err := c.PushIndex(ctx, prefix, js); err != nil {
			return err
		}
	}
	return o.print(map[string]any{"file": output, "pushed": push, "plugins": len(x.Entries), "versions": n}, func(w io.Writer) error {
		where := output
		if push {
			where = strings.TrimPrefix(strings.Join([]string{output, prefix + ":" + oci.IndexTag}, " and "), " and ")
		}
		_, err := fmt.Fprintf(w, "wrote %s: %d plugin(s), %d version(s)\n", where, len(x.Entries), n)
		return err
	})
}
