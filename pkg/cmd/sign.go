package cmd

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/oci"
)

// passwordEnv holds the signing key's password, so that it is never a flag (and
// never in a shell's history or a process listing).
const passwordEnv = "KUBEPLUG_SIGNING_PASSWORD"

// password returns the signing password: the first line of standard input with
// --password-stdin, else $KUBEPLUG_SIGNING_PASSWORD; nil when neither is given.
func (o *options) password(fromStdin bool) ([]byte, error) {
	if fromStdin {
		// One line, bounded: standard input from /dev/zero is an error, not an
		// out-of-memory.
		line, err := bounded.ReadLine(o.streams.In, bounded.MaxPasswordSize)
		if err != nil {
			return nil, fmt.Errorf("--password-stdin: reading the password from standard input: %w", err)
		}
		if len(line) == 0 {
			return nil, errors.New("--password-stdin: standard input holds no password")
		}
		return line, nil
	}
	if v, ok := o.getenv(passwordEnv); ok && v != "" {
		return []byte(v), nil
	}
	return nil, nil
}

func newPluginKeygenCmd(o *options) *cobra.Command {
	var (
		a          action.Keygen
		fromStdin  bool
		noPassword bool
	)
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Make a key pair to sign plugin packages with",
		Long: `Write a new ECDSA P-256 key pair: PREFIX.key, the private key (mode 0600), and
PREFIX.pub, the public key to give to those who install your plugins. The files are
cosign's: 'cosign sign-blob' and 'cosign verify-blob' use them too.

The private key is encrypted with a password taken from $` + passwordEnv + `, or
from the first line of standard input with --password-stdin. --no-password writes it
unencrypted, for CI systems that keep the key file itself as a secret. Existing
files are never overwritten. The password and the private key are never printed.`,
		Example: `  KUBEPLUG_SIGNING_PASSWORD=... kubeplug plugin keygen
  kubeplug plugin keygen --output-key-prefix ci --no-password`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pw, err := o.password(fromStdin)
			if err != nil {
				return err
			}
			switch {
			case noPassword && pw != nil:
				return fmt.Errorf("--no-password, but a password was given (by $%s or --password-stdin): choose one", passwordEnv)
			case !noPassword && pw == nil:
				return fmt.Errorf("no password to encrypt the private key: set $%s, pass --password-stdin, or --no-password for an unencrypted key", passwordEnv)
			}
			a.Password = pw
			res, err := a.Run(cmd.Context())
			if err != nil {
				return err
			}
			return o.print(res, func(w io.Writer) error {
				state := "encrypted"
				if !res.Encrypted {
					state = "UNENCRYPTED: keep it secret"
				}
				_, err := fmt.Fprintf(w, "private key: %s (%s)\npublic key:  %s\nkey ID:      %s\nnext: kubeplug plugin sign --key %s ARCHIVE\n",
					res.PrivateKey, state, res.PublicKey, res.KeyID, res.PrivateKey)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&a.Prefix, "output-key-prefix", "kubeplug", "the path of the key files without extension: PREFIX.key and PREFIX.pub")
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the password from the first line of standard input")
	cmd.Flags().BoolVar(&noPassword, "no-password", false, "write the private key unencrypted (for CI that keeps the key file secret)")
	return cmd
}

func newPluginSignCmd(o *options) *cobra.Command {
	var (
		a         action.Sign
		fromStdin bool
		reg       oci.Options
	)
	cmd := &cobra.Command{
		Use:   "sign ARCHIVE",
		Short: "Sign a plugin package archive with a private key",
		Long: `Sign ARCHIVE, a package archive written by 'plugin package', with the private key
of 'plugin keygen', and write the detached signature beside it as ARCHIVE.sig. The
archive is checked as a package first; an invalid one is not signed.

The signature is cosign's blob signature (ECDSA P-256 over the SHA-256 of the
archive), made offline: no transparency log or certificate authority is used.
'kubeplug plugin verify --key KEY.pub ARCHIVE' checks it, and so does cosign's
verify-blob with the transparency log check turned off (see docs/distribution.md).
An encrypted key's password comes from $` + passwordEnv + ` or --password-stdin.

With --push oci://HOST/REPO/NAME:VERSION the signature is also attached to that
artifact (pushed by 'plugin push') as an OCI referrer of artifact type
` + action.SignatureArtifactType + `; the artifact must hold this very
archive. Registry credentials come from the docker config file.`,
		Example: `  kubeplug plugin package ./demo
  KUBEPLUG_SIGNING_PASSWORD=... kubeplug plugin sign --key kubeplug.key demo-0.1.0.tgz
  kubeplug plugin sign --key kubeplug.key demo-0.1.0.tgz --push oci://registry.example.com/plugins/demo:0.1.0`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"tgz"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			pw, err := o.password(fromStdin)
			if err != nil {
				return err
			}
			a.Password = pw
			if a.Push != "" {
				if a.Registry, err = oci.New(reg); err != nil {
					return err
				}
			}
			res, err := a.Run(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.print(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "signed plugin %s@%s (%s, digest %s) with key %s\nsignature: %s\n",
					res.Name, res.Version, res.File, res.Digest, res.KeyID, res.Signature)
				if err == nil && res.Referrer != "" {
					_, err = fmt.Fprintf(w, "attached to %s as %s\n", a.Push, res.Referrer)
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&a.Key, "key", "", "the private key file (from kubeplug plugin keygen)")
	cmd.Flags().StringVar(&a.Output, "signature", "", "the signature file to write (default: ARCHIVE.sig)")
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the key's password from the first line of standard input")
	cmd.Flags().StringVar(&a.Push, "push", "", "also attach the signature to this pushed artifact, oci://HOST/REPO/NAME:VERSION")
	cmd.Flags().BoolVar(&reg.PlainHTTP, "plain-http", false, "talk HTTP, not HTTPS, to the registry (a loopback registry — localhost, 127.0.0.0/8, ::1 — always is)")
	cmd.Flags().StringArrayVar(&reg.CAFiles, "ca-file", nil, "a PEM file of certificate authorities to trust besides the system's (repeatable)")
	cmd.Flags().StringVar(&reg.RegistryConfig, "registry-config", "", "the docker config file with registry credentials (default: $DOCKER_CONFIG/config.json or ~/.docker/config.json)")
	cmd.Flags().DurationVar(&reg.Timeout, "registry-timeout", oci.DefaultTimeout, "bound on each request to the registry")
	_ = cmd.MarkFlagRequired("key")
	_ = cmd.MarkFlagFilename("key", "key")
	return cmd
}

func newPluginVerifyCmd(o *options) *cobra.Command {
	var (
		a  action.Verify
		rf registryFlags
	)
	cmd := &cobra.Command{
		Use:   "verify ARCHIVE|oci://HOST/REPO/NAME:VERSION",
		Short: "Check a plugin package archive's signature against trusted public keys",
		Long: `Check that ARCHIVE.sig is a signature of ARCHIVE by one of the public keys given
with --key, and that ARCHIVE is a valid package. A missing signature, a signature by
another key, an archive changed after signing and a malformed signature are each
refused with an error naming the archive, the plugin and version when it can be
read, the signature file and the keys tried; the exit status is then 1.

Given oci://HOST/REPO/NAME:VERSION (or …@sha256:HEX), the artifact is pulled (every
blob checked against its digest) and one of the signatures attached to it by
'kubeplug plugin sign --push' must verify over its archive.`,
		Example: `  kubeplug plugin verify --key kubeplug.pub demo-0.1.0.tgz
  kubeplug plugin verify --key alice.pub --key bob.pub demo-0.1.0.tgz -o json
  kubeplug plugin verify --key kubeplug.pub oci://registry.example.com/plugins/demo:0.1.0`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"tgz"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.HasPrefix(args[0], "oci://") {
				c, err := rf.client(o.streams.In)
				if err != nil {
					return err
				}
				a.Registry = c
			}
			res, err := a.Run(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.print(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "verified plugin %s@%s (%s, digest %s): signed by %s (%s)\n",
					res.Name, res.Version, res.File, res.Digest, res.Key, res.KeyID)
				return err
			})
		},
	}
	cmd.Flags().StringArrayVar(&a.Keys, "key", nil, "a trusted public key file; repeat for several")
	cmd.Flags().StringVar(&a.Signature, "signature", "", "the signature file (default: ARCHIVE.sig)")
	rf.add(cmd.Flags())
	_ = cmd.MarkFlagRequired("key")
	return cmd
}
