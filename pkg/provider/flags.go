package provider

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"

	"github.com/spf13/pflag"
)

// FlagDefiner defines on fs the command-line flags of `kubeplug up` that set
// one provider's typed options: setting a flag adds its Option to *opts (the
// flags bind straight into the run's options, no variable between). The
// returned check, when not nil, runs once the flags are parsed and refuses
// combinations of them; run says whether up starts the cluster (false for a
// dry run).
//
// Providers register their definer in an init function, as they register
// their factory, so a binary that links no provider has none of its flags.
type FlagDefiner func(fs *pflag.FlagSet, opts *[]Option) (check func(run bool) error)

var (
	flagsMu  sync.Mutex
	definers []FlagDefiner
)

// RegisterFlags adds d to the flags `kubeplug up` defines.
func RegisterFlags(d FlagDefiner) {
	flagsMu.Lock()
	defer flagsMu.Unlock()
	definers = append(definers, d)
}

// DefineFlags defines every registered provider's flags on fs, bound into
// *opts, and returns the check of them all.
func DefineFlags(fs *pflag.FlagSet, opts *[]Option) (check func(run bool) error) {
	flagsMu.Lock()
	ds := slices.Clone(definers)
	flagsMu.Unlock()
	var checks []func(bool) error
	for _, d := range ds {
		if c := d(fs, opts); c != nil {
			checks = append(checks, c)
		}
	}
	return func(run bool) error {
		for _, c := range checks {
			if err := c(run); err != nil {
				return err
			}
		}
		return nil
	}
}

// FlagOptions returns the options the registered providers' flags set when
// given as args ("--accept-new-host-keys"), checked as `kubeplug up` checks
// them: how a program other than the CLI (the controller, for a
// ManagedCluster) sets a provider's typed option without importing the
// provider. A flag no linked provider defines is an error saying so.
func FlagOptions(args ...string) ([]Option, error) {
	fs := pflag.NewFlagSet("provider options", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var opts []Option
	check := DefineFlags(fs, &opts)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("provider options %v: %w (this program links %v)", args, err, Names())
	}
	if err := check(true); err != nil {
		return nil, err
	}
	return opts, nil
}

// optionFlag is a boolean flag that adds a provider's typed option to the
// list when set, and takes it out when set false.
type optionFlag struct {
	to  *[]Option
	opt Option
}

func (f *optionFlag) String() string {
	if f.to == nil {
		return "false"
	}
	return strconv.FormatBool(slices.Contains(*f.to, f.opt))
}

func (f *optionFlag) Set(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	*f.to = slices.DeleteFunc(*f.to, func(o Option) bool { return o == f.opt })
	if on {
		*f.to = append(*f.to, f.opt)
	}
	return nil
}

func (f *optionFlag) Type() string { return "bool" }

// BoolOptionVar defines a boolean flag that adds opt (a comparable value) to
// *to when given.
func BoolOptionVar(fs *pflag.FlagSet, to *[]Option, opt Option, name, usage string) {
	fs.Var(&optionFlag{to: to, opt: opt}, name, usage)
	fs.Lookup(name).NoOptDefVal = "true" // it stands alone: --build-from-source
}
