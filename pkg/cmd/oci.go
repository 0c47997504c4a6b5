package cmd

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// registryFlags are the flags of every command that talks to an OCI registry.
type registryFlags struct {
	opts          oci.Options
	passwordStdin bool
}

func (f *registryFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.opts.Username, "username", "", "registry user name (default: the credentials of the docker config file)")
	fs.BoolVar(&f.passwordStdin, "password-stdin", false, "read the registry password from stdin (with --username)")
	fs.StringArrayVar(&f.opts.CAFiles, "ca-file", nil, "a PEM file of certificate authorities to trust besides the system's (repeatable)")
	fs.BoolVar(&f.opts.PlainHTTP, "plain-http", false, "talk HTTP, not HTTPS, to the registry (a loopback registry — localhost, 127.0.0.0/8, ::1 — always is)")
	fs.StringVar(&f.opts.RegistryConfig, "registry-config", "", "the docker config file with registry credentials (default: $DOCKER_CONFIG/config.json or ~/.docker/config.json)")
	fs.DurationVar(&f.opts.Timeout, "registry-timeout", oci.DefaultTimeout, "bound on each request to the registry")
}

// client reads the password from stdin when asked and builds the registry client.
func (f *registryFlags) client(in io.Reader) (*oci.Client, error) {
	o := f.opts
	if f.passwordStdin {
		if o.Username == "" {
			return nil, errors.New("--password-stdin needs --username")
		}
		// Read whole (a token may be wrapped over lines), bounded: more than
		// the limit is refused, not truncated into a wrong password.
		b, err := bounded.Read(in, bounded.MaxPasswordSize)
		if err != nil {
			return nil, fmt.Errorf("--password-stdin: cannot read the password from stdin: %w", err)
		}
		o.Password = strings.TrimRight(string(b), "\r\n")
	} else if o.Username != "" {
		return nil, errors.New("--username needs --password-stdin (a password is never taken as a flag)")
	}
	return oci.New(o)
}

func newPluginPushCmd(o *options) *cobra.Command {
	var rf registryFlags
	cmd := &cobra.Command{
		Use:   "push FILE oci://HOST/PREFIX",
		Short: "Push a plugin archive to an OCI registry, tagged with its version",
		Long: `Push a package archive (as 'plugin package' writes it) to the repository
PREFIX/NAME of the registry HOST, tagged with the plugin's version. The artifact has
the artifact type application/vnd.kubeplug.plugin.v1: a JSON config naming the plugin,
its version and package digest, and the archive as its one layer. The archive is
unpacked and its manifest checked before anything is uploaded; pushing the same
archive twice gives the same manifest digest.

The prefix is an OCI catalog: push also adds the version to the catalog's index, an
artifact tagged 'index' in the repository PREFIX, so that 'plan' and 'apply' with
--catalog oci://HOST/PREFIX (or a catalog source in cluster.yaml) see it without
listing the registry. Publish to one catalog from one place at a time: two pushes at
once may lose an index entry.

Credentials come from the docker config file (as 'docker login' and 'oras login'
write it) unless --username and --password-stdin are given.`,
		Example: `  kubeplug plugin package ./demo -o demo-0.1.0.tgz
  kubeplug plugin push demo-0.1.0.tgz oci://registry.example.com/kubeplug/plugins
  echo "$TOKEN" | kubeplug plugin push demo-0.1.0.tgz oci://ghcr.io/me/plugins --username me --password-stdin
  kubeplug plugin push demo-0.1.0.tgz oci://127.0.0.1:5000/plugins   # loopback: plain HTTP`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := rf.client(o.streams.In)
			if err != nil {
				return err
			}
			res, err := source.PushToCatalog(cmd.Context(), c, args[0], args[1])
			if err != nil {
				return err
			}
			return o.print(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "pushed plugin %s@%s to %s\nmanifest: %s\ndigest: %s\n", res.Name, res.Version, res.Ref, res.Manifest, res.Digest)
				return err
			})
		},
	}
	rf.add(cmd.Flags())
	return cmd
}

func newPluginPullCmd(o *options) *cobra.Command {
	var rf registryFlags
	var dir string
	cmd := &cobra.Command{
		Use:   "pull oci://HOST/PREFIX/NAME:VERSION|oci://HOST/PREFIX/NAME@sha256:HEX",
		Short: "Pull a plugin archive from an OCI registry, checked by digest",
		Long: `Pull the plugin NAME at VERSION (or at a manifest digest) and write it as
NAME-VERSION.tgz. The manifest, the config and the archive are each checked against
their digests, and the unpacked package against the name, version and package digest
the artifact announces; a mismatch names the expected and the found digest and writes
nothing.`,
		Example: `  kubeplug plugin pull oci://registry.example.com/kubeplug/plugins/demo:0.1.0
  kubeplug plugin pull oci://127.0.0.1:5000/plugins/demo@sha256:0123… -d ./plugins`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := rf.client(o.streams.In)
			if err != nil {
				return err
			}
			res, err := c.Pull(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			file, err := res.WriteArchive(dir)
			if err != nil {
				return fmt.Errorf("cannot write the plugin archive: %w", err)
			}
			out := struct {
				oci.Pushed
				File string `json:"file"`
			}{oci.Pushed{Name: res.Name, Version: res.Version, Ref: res.Ref, Manifest: res.Manifest, Digest: res.Digest}, file}
			return o.print(out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "pulled plugin %s@%s into %s\nmanifest: %s\ndigest: %s\n", res.Name, res.Version, file, res.Manifest, res.Digest)
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&dir, "destination", "d", ".", "the directory to write NAME-VERSION.tgz into")
	_ = cmd.MarkFlagDirname("destination")
	rf.add(cmd.Flags())
	return cmd
}
