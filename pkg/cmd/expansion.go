package cmd

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/expansion"
	"github.com/kubeplug/kubeplug/pkg/oci"
)

func newExpansionCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "expansion",
		Short: "Build and check expansion packages: what an air-gapped site needs in one file",
		Long: `An expansion is a directory or a tar archive holding expansion.yaml and what it
names: plugin packages, Helm charts, container images (an OCI image layout under
images/), files and hooks for the machines, hooks for the installer, value
overrides and the steps the site provides itself. See docs/expansions.md.`,
	}
	cmd.AddCommand(newExpansionCreateCmd(o), newExpansionLintCmd(o), newExpansionInspectCmd(o), newExpansionVerifyCmd(o), newExpansionPushCmd(o), newExpansionTestCmd(o), newExpansionSignAllowlistCmd(o))
	return cmd
}

func newExpansionLintCmd(o *options) *cobra.Command {
	a := action.NewExpansionLint(o.cfg)
	return &cobra.Command{
		Use:   "lint PATH...",
		Short: "Check expansions: the manifest, the files it names, the checksums",
		Long: `Check each PATH, an expansion directory or archive: expansion.yaml against its
schema and rules (an unknown skip step is an error), that every file and image it
names is in the package, that no entry is a link, climbs out of the package or
breaks a size limit, and, when the package has checksums.txt, that every file has
the digest listed there. Problems name the file, line and field.`,
		Example: `  kubeplug expansion lint ./site
  kubeplug expansion lint site.tar`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, l := a.Run(cmd.Context(), args...)
			if o.report(l) {
				return errFailed
			}
			return o.print(map[string]int{"expansions": n, "warnings": len(l.Warnings())}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%d expansion(s) checked, %d warning(s)\n", n, len(l.Warnings()))
				return err
			})
		},
	}
}

func newExpansionInspectCmd(o *options) *cobra.Command {
	a := action.NewExpansionInspect(o.cfg)
	return &cobra.Command{
		Use:   "inspect PATH",
		Short: "Say what an expansion holds and changes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, l := a.Run(cmd.Context(), args[0])
			if o.report(l) {
				return errFailed
			}
			return o.print(info, func(w io.Writer) error { return printExpansion(w, info) })
		},
	}
}

func printExpansion(w io.Writer, i *action.ExpansionInfo) error {
	var b strings.Builder
	fmt.Fprintf(&b, "expansion %s@%s", i.Name, i.Version)
	if i.Description != "" {
		fmt.Fprintf(&b, ": %s", i.Description)
	}
	digest := i.Digest
	if digest == "" {
		digest = "none (not packed: no " + expansion.ChecksumsFile + ")"
	}
	fmt.Fprintf(&b, "\nlocation: %s\ndigest:   %s\nsigned:   %t\nfiles:    %d (%d bytes)\n", i.Location, digest, i.Signed, i.Files, i.Bytes)
	for _, s := range []struct {
		title string
		items []string
	}{
		{"plugins", i.Plugins}, {"charts", i.Charts}, {"images", i.Images}, {"hooks", i.Hooks},
		{"node files", i.NodeFiles}, {"overrides", i.Overrides}, {"skip steps", i.SkipSteps},
		{"skip conditions", i.SkipConditions}, {"delegated conditions", i.DelegateConditions},
	} {
		if len(s.items) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s:\n", s.title)
		for _, it := range s.items {
			fmt.Fprintf(&b, "  %s\n", it)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func newExpansionVerifyCmd(o *options) *cobra.Command {
	a := action.NewExpansionVerify(o.cfg)
	var clusterFile string
	cmd := &cobra.Command{
		Use:   "verify [--key KEY.pub]... [-f cluster.yaml] PATH",
		Short: "Check an expansion's files against its checksums, and its signature",
		Long: `Read PATH, an expansion made by 'expansion create', in one pass: every file
must have the SHA-256 that checksums.txt lists, none may be missing or added,
and, with --key, checksums.txt.sig must be a signature of checksums.txt by one of
the keys (the keys of 'plugin keygen'; cosign's verify-blob checks the same
signature). A tampered, truncated or unsigned package is refused naming the file.
With -f, the cluster file's allowlist (spec.expansions.allow) is checked too: a
step or check the expansion skips or delegates that it does not allow is
refused, naming the expansion and the step.`,
		Example: `  kubeplug expansion verify site.tar
  kubeplug expansion verify --key site.pub site.tar
  kubeplug expansion verify -f cluster.yaml site.tar`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var v *expansion.Verification
			var l diag.List
			if clusterFile != "" {
				v, l = withCluster(clusterFile, func(cl *config.Cluster) (*expansion.Verification, diag.List) {
					return a.Run(cmd.Context(), args[0], cl)
				})
			} else {
				v, l = a.Run(cmd.Context(), args[0], nil)
			}
			if o.report(l) {
				return errFailed
			}
			return o.print(v, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "verified %s: %s\n", args[0], v)
				return err
			})
		},
	}
	cmd.Flags().StringArrayVar(&a.Keys, "key", nil, "a trusted public key file; repeat for several (a signature is then required)")
	cmd.Flags().StringVarP(&clusterFile, "file", "f", "", "a cluster file whose spec.expansions.allow the expansion must keep to")
	return cmd
}

func newExpansionCreateCmd(o *options) *cobra.Command {
	var (
		files     []string
		out       string
		fromStdin bool
		reg       oci.Options
		mirrors   []string
	)
	a := action.NewExpansionCreate(o.cfg)
	cmd := &cobra.Command{
		Use:   "create -f expansion.yaml|cluster.yaml... -o site.tar",
		Short: "Pack an expansion: plugins, charts, images, files and hooks in one archive",
		Long: `Pack an expansion into one tar archive, from connected sources, for a site
that has none.

-f names an expansion.yaml (its directory is packed: every file in it), a
cluster.yaml, or one of each. With a cluster file the cluster is rendered as
'render' does, and every container image its Kubernetes objects and charts
reference is packed; with both, the cluster is rendered as the expansion
changes it, as 'up --expansion-dir' will: the plugins the expansion enables
(overrides.plugins) are rendered and their images packed, the built-in ones
it skips (skipSteps: plugin/NAME) are not. A cluster file alone makes an
expansion named after the cluster holding those images and every plugin
package the cluster resolves to that is not built in. Images (the manifest's
spec.images, the render's, and --image) are pulled for one platform into
images/, an OCI image layout, layers streamed to disk; plugins named by oci://
reference are pulled and checked against their pinned digest.

--image-mirror FROM=TO pulls the images of registry (or repository prefix)
FROM from TO instead — a mirror or a registry filled beforehand, for building
without reaching the upstream registries — and packs them under their own
names, so the site sees the references its render names. The longest FROM
that matches an image wins; loopback and private-range mirrors are plain HTTP.

--image-archive PATH packs the images of a 'docker save' tarball (the layout
docker has always written, or docker 25's OCI one) or of an OCI image layout
directory, by the names it gives them (RepoTags; the index's
io.containerd.image.name or a full org.opencontainers.image.ref.name); an
image it holds is not pulled. Every layer is read and checked against its
digest first: a damaged or truncated archive is refused naming the archive
and the layer, and nothing is written.

The archive is deterministic (files in order, fixed times, owners and modes)
and ends with checksums.txt, the SHA-256 of every file, and, with --key, its
signature checksums.txt.sig (an encrypted key's password from $` + passwordEnv + `
or --password-stdin). The archive is written atomically.`,
		Example: `  kubeplug expansion create -f site/expansion.yaml -o site.tar
  kubeplug expansion create -f cluster.yaml -o site.tar --key site.key
  kubeplug expansion create -f site/expansion.yaml -f cluster.yaml --image registry.example.com/tools/debug:1.0 -o site.tar
  kubeplug expansion create -f site/expansion.yaml -f cluster.yaml --image-mirror registry.k8s.io=127.0.0.1:5000/k8s -o site.tar
  docker save team/app:v1 -o app.tar && kubeplug expansion create -f site/expansion.yaml --image-archive app.tar -o site.tar`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var manifest, clusterFile string
			for _, f := range files {
				kind, err := fileKind(f)
				if err != nil {
					return err
				}
				switch {
				case kind == v1alpha1.KindExpansion && manifest == "":
					manifest = f
				case kind == v1alpha1.KindCluster && clusterFile == "":
					clusterFile = f
				case kind == v1alpha1.KindExpansion || kind == v1alpha1.KindCluster:
					return fmt.Errorf("-f %s: a second %s file; give at most one expansion.yaml and one cluster file", f, kind)
				default:
					return fmt.Errorf("-f %s: expected kind %s or %s, found %q", f, v1alpha1.KindExpansion, v1alpha1.KindCluster, kind)
				}
			}
			a.Mirrors = nil
			for _, m := range mirrors {
				mm, err := expansion.ParseMirror(m)
				if err != nil {
					return fmt.Errorf("--image-mirror: %w", err)
				}
				a.Mirrors = append(a.Mirrors, mm)
			}
			if a.Key != "" {
				pw, err := o.password(fromStdin)
				if err != nil {
					return err
				}
				a.Password = pw
			}
			var err error
			if a.Registry, err = oci.New(reg); err != nil {
				return err
			}
			run := func(cl *config.Cluster) (*action.ExpansionCreated, diag.List) {
				return a.Run(cmd.Context(), manifest, cl, out)
			}
			var res *action.ExpansionCreated
			var l diag.List
			if clusterFile != "" {
				res, l = withCluster(clusterFile, run)
			} else {
				res, l = run(nil)
			}
			if o.report(l) {
				return errFailed
			}
			return o.print(res, func(w io.Writer) error {
				signed := "unsigned"
				if res.KeyID != "" {
					signed = "signed with key " + res.KeyID
				}
				_, err := fmt.Fprintf(w, "packed %s: %d file(s), %d bytes, %d image(s), digest %s, %s\n", res.File, res.Files, res.Bytes, len(res.Images), res.Digest, signed)
				return err
			})
		},
	}
	cmd.Flags().StringArrayVarP(&files, "file", "f", nil, "an expansion.yaml or a cluster file (at most one of each)")
	cmd.Flags().StringVarP(&out, "output", "o", "", "the archive to write, for example site.tar (required)")
	cmd.Flags().StringArrayVar(&a.Images, "image", nil, "an image to pack besides those named (repeatable)")
	cmd.Flags().StringArrayVar(&a.Archives, "image-archive", nil, "a docker save tarball or an OCI image layout directory whose images (by the names it gives them) are packed; each layer is checked against its digest (repeatable)")
	cmd.Flags().StringArrayVar(&mirrors, "image-mirror", nil, "FROM=TO: pull the images of registry or repository prefix FROM from TO instead, packed under their own names (repeatable)")
	cmd.Flags().StringVar(&a.Key, "key", "", "a private key file to sign the package with (from kubeplug plugin keygen)")
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the key's password from the first line of standard input")
	cmd.Flags().BoolVar(&reg.PlainHTTP, "plain-http", false, "pull plugins over plain HTTP (a registry on a private network; a loopback one is plain HTTP without it)")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagRequired("output")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}

// fileKind reads the kind of a kubeplug file.
func fileKind(file string) (string, error) {
	b, err := bounded.ReadFileAs("file", file, config.MaxFileSize)
	if err != nil {
		return "", err
	}
	var head struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(b, &head); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return head.Kind, nil
}

// expansionFlags adds --expansion-dir and its companions to a command that plans
// a cluster (plan, render, diff, apply, up).
func expansionFlags(cmd *cobra.Command, o *options) {
	f := cmd.Flags()
	f.StringArrayVar(&o.expansions.Dirs, "expansion-dir", nil, "a directory of expansion packages (expansion directories and .tar archives) to verify and merge; repeatable (see docs/expansions.md)")
	f.StringArrayVar(&o.expansions.Keys, "expansion-key", nil, "a public key every expansion must be signed by; repeatable")
	f.StringVar(&o.expansions.SiteRegistry, "site-registry", "", "host:port of the registry the cluster pulls from: expansions' images are pushed there and image references rewritten to it")
	f.BoolVar(&o.expansions.SiteRegistryPlainHTTP, "site-registry-plain-http", false, "talk plain HTTP to --site-registry (a loopback one is plain HTTP without it)")
	_ = cmd.MarkFlagDirname("expansion-dir")
}

func newExpansionPushCmd(o *options) *cobra.Command {
	a := action.NewExpansionPush(o.cfg)
	cmd := &cobra.Command{
		Use:   "push PATH HOST[:PORT]|oci://HOST/REPO:TAG",
		Short: "Push an expansion's images to the site's registry, or the whole expansion as an OCI artifact",
		Long: `Verify the expansion at PATH (as 'expansion verify' does, with --key a signature
is required), then push every image it carries to the registry at HOST[:PORT]
under its rewritten name (registry.example.com/team/app:v1 becomes
HOST/team/app:v1), straight from the archive: nothing is unpacked, and every
blob is checked against its digest as it streams. Blobs the registry has are not
sent again and an image is tagged only after all its blobs, so an interrupted
push resumes where it stopped. 'up' and 'apply' do the same before deploying
when they are given the expansion and a site registry.

With oci://HOST/REPO:TAG instead, the verified archive (the .tar 'expansion
create' writes) is pushed whole, streamed as one layer of an OCI artifact, for
the controller's spec.expansions to pull (docs/controller.md).`,
		Example: `  kubeplug expansion push --key site.pub site.tar registry.site:5000
  kubeplug expansion push --key site.pub site.tar oci://registry.site:5000/expansions/site:1.0.0`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pushed, l := a.Run(cmd.Context(), args[0], args[1])
			if o.report(l) {
				return errFailed
			}
			return o.print(map[string][]string{"images": pushed}, func(w io.Writer) error {
				for _, p := range pushed {
					if _, err := fmt.Fprintln(w, "pushed", p); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringArrayVar(&a.Keys, "key", nil, "a trusted public key file; repeat for several (a signature is then required)")
	cmd.Flags().BoolVar(&a.PlainHTTP, "plain-http", false, "talk plain HTTP to the registry (a loopback one is plain HTTP without it)")
	return cmd
}

func newExpansionTestCmd(o *options) *cobra.Command {
	var file string
	a := action.NewExpansionTest(o.cfg)
	cmd := &cobra.Command{
		Use:   "test PATH [-f cluster.yaml]",
		Short: "Bring an expansion up on a throwaway local cluster and run its checks",
		Long: `Bring up a throwaway cluster on the local provider — the cluster file's, or
without -f a sample one (the control plane and one worker) — with the expansion
at PATH verified and merged as up --expansion-dir merges it: its plugins, node
files and hooks, overrides, skipped steps and conditions, and its installer
hooks run. The plugins' validate checks run (delegated ones wait for their
operator). The cluster and its state are deleted whatever happened; your
clusters and kubeconfig are not touched.`,
		Example: `  kubeplug expansion test site.tar
  kubeplug expansion test --key site.pub site.tar -f cluster.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, l := optionalCluster(file)
			if o.report(l) {
				return errFailed
			}
			res, l := a.Run(cmd.Context(), args[0], cl)
			if o.report(l) || res == nil {
				return errFailed
			}
			return o.print(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "expansion %s: cluster up with %d plugin(s), %d check(s) passed, deleted\n", args[0], len(res.Plugins), len(res.Checks))
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "a cluster file to bring up (on the local provider) instead of the sample cluster")
	cmd.Flags().StringArrayVar(&a.Keys, "key", nil, "a trusted public key file; repeat for several (a signature is then required)")
	cmd.Flags().DurationVar(&a.Timeout, "timeout", 5*time.Minute, "how long to wait for the cluster's objects to be ready")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}
