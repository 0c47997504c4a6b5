package cmd

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Flag values are checked before any command runs, by rule, so that no value is
// taken on trust or quietly replaced by a default: the rules are held here as
// data, and TestEveryFlagHasARule fails for a new count or namespace flag that
// has none.
var (
	// namespaceFlags name a Kubernetes namespace: a DNS label (RFC 1123).
	namespaceFlags = map[string]bool{
		"namespace":              true,
		"watch-namespace":        true,
		"leader-elect-namespace": true,
	}
	// countFlags are counts: a value given must be at least 1. (Their
	// defaults stand for "unset" where they are 0, as --to-revision's.)
	countFlags = map[string]bool{
		"replicas":    true,
		"concurrency": true,
		"shards":      true,
		"history-max": true,
		"to-revision": true,
	}
)

// checkFlags checks the flags the user set on cmd (and its parents' persistent
// flags) against their rules; the error names the flag, the value and the rule.
func checkFlags(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err == nil {
			err = checkFlag(f)
		}
	})
	return err
}

func checkFlag(f *pflag.Flag) error {
	v := f.Value.String()
	switch {
	case namespaceFlags[f.Name]:
		if f.Name == "watch-namespace" && v == "" {
			return nil // all namespaces
		}
		if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
			return fmt.Errorf("--%s %q: a namespace must be a DNS label (RFC 1123): %s", f.Name, v, strings.Join(errs, "; "))
		}
	case countFlags[f.Name]:
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("--%s %s: a count must be a whole number of at least 1", f.Name, v)
		}
	case f.Value.Type() == "duration":
		if d, err := time.ParseDuration(v); err == nil && d < 0 {
			return fmt.Errorf("--%s %s: a duration must not be negative", f.Name, v)
		}
	}
	return nil
}
