package cmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kubeplug/kubeplug/pkg/action"
)

func newExpansionSignAllowlistCmd(o *options) *cobra.Command {
	var (
		a         action.ExpansionSignAllowlist
		fromStdin bool
	)
	cmd := &cobra.Command{
		Use:   "sign-allowlist --key KEY FILE",
		Short: "Sign a site's allowlist of what expansions may skip or delegate",
		Long: `Sign FILE, a site's allowlist (the fields of a cluster file's
spec.expansions.allow: skipSteps, skipConditions, delegateConditions), with the
private key of 'plugin keygen', and write the detached signature beside it as
FILE.sig (cosign's blob signature, as 'plugin sign' writes). A cluster file that
names FILE as spec.expansions.allowFile uses it only when FILE.sig verifies
with a key the run trusts (the keys the expansions are verified with): an
unsigned or changed allowlist is refused, naming its digest. An encrypted key's
password comes from $` + passwordEnv + ` or --password-stdin.`,
		Example: `  kubeplug expansion sign-allowlist --key site.key site-allow.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pw, err := o.password(fromStdin)
			if err != nil {
				return err
			}
			a.Password = pw
			res, err := a.Run(args[0])
			if err != nil {
				return err
			}
			return o.print(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "signed allowlist %s with key %s\nsignature: %s\n", res.File, res.KeyID, res.Signature)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&a.Key, "key", "", "the private key file (from kubeplug plugin keygen)")
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the key's password from the first line of standard input")
	_ = cmd.MarkFlagRequired("key")
	_ = cmd.MarkFlagFilename("key", "key")
	return cmd
}
