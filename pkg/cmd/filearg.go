package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// clusterFileArg lets cmd, which takes its cluster file as -f and nothing
// positional, take it positionally too: "kubeplug up cluster.yaml", as kind and
// kubectl users type it. Giving both is an error, not a silent choice; more
// than one positional argument is an error naming them. Call it once the
// command's flags are defined.
func clusterFileArg(cmd *cobra.Command) {
	if cmd.Flags().Lookup("file") == nil {
		panic("clusterFileArg: " + cmd.Name() + " has no --file flag")
	}
	cmd.Use = strings.Replace(cmd.Use, "[-f cluster.yaml]", "[[-f] cluster.yaml]", 1)
	cmd.Use = strings.Replace(cmd.Use, " -f cluster.yaml", " [-f] cluster.yaml", 1)
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 {
			return fmt.Errorf("%s takes one cluster file, as -f FILE or FILE; got %d arguments: %s", cmd.CommandPath(), len(args), strings.Join(args, " "))
		}
		return nil
	}
	// Before the required-flag check, which then sees the file given.
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		f := cmd.Flags().Lookup("file")
		if len(args) == 0 {
			if _, required := f.Annotations[cobra.BashCompOneRequiredFlag]; required && !f.Changed {
				return fmt.Errorf("%s needs a cluster file: %s cluster.yaml (or -f cluster.yaml)", cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		}
		if f.Changed {
			return fmt.Errorf("the cluster file is given twice, as -f %s and as argument %s: give it once", f.Value.String(), args[0])
		}
		return cmd.Flags().Set("file", args[0])
	}
	cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 || cmd.Flags().Lookup("file").Changed {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
	}
}
