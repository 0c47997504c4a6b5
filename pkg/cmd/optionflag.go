package cmd

import (
	"slices"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

// optionFlag is a boolean flag that adds a provider's typed option
// (provider.Option) to the action's list when set, and takes it out when set
// false: the flag is bound straight into the action, no variable between.
type optionFlag struct {
	to  *[]provider.Option
	opt provider.Option
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
	*f.to = slices.DeleteFunc(*f.to, func(o provider.Option) bool { return o == f.opt })
	if on {
		*f.to = append(*f.to, f.opt)
	}
	return nil
}

func (f *optionFlag) Type() string { return "bool" }

// optionFlagVar defines a boolean flag that adds opt to *to when given.
func optionFlagVar(fs *pflag.FlagSet, to *[]provider.Option, opt provider.Option, name, usage string) {
	fs.Var(&optionFlag{to: to, opt: opt}, name, usage)
	fs.Lookup(name).NoOptDefVal = "true" // it stands alone: --build-from-source
}
