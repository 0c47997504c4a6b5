package cmd

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// fields flattens the settable options of an action: exported fields, nested
// structs by path; functions (progress callbacks), pointers (a library user's
// REST config, a nested action) and the unexported shared config are not options.
func fields(v reflect.Value, prefix string, out map[string]reflect.Value) {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		name := prefix + f.Name
		switch fv := v.Field(i); fv.Kind() {
		case reflect.Func, reflect.Pointer:
		case reflect.Struct:
			if fv.Type().PkgPath() == "time" {
				out[name] = fv
				continue
			}
			fields(fv, name+".", out)
		default:
			out[name] = fv
		}
	}
}

// nonDefault is a value for f other than its default.
func nonDefault(t *testing.T, f *pflag.Flag) string {
	t.Helper()
	switch f.Value.Type() {
	case "bool":
		if f.DefValue == "true" {
			return "false"
		}
		return "true"
	case "duration":
		return "7m13s"
	case "int":
		return "37"
	case "stringArray":
		return "some-value"
	case "dir":
		return "/some-dir"
	case "string":
		if f.Name == "dry-run" {
			return "server"
		}
		return "some-value"
	}
	t.Fatalf("flag --%s: no test value for type %s", f.Name, f.Value.Type())
	return ""
}

// boundFields sets each flag of the command build makes, one at a time on a fresh
// command and action, and returns which option fields each flag changed.
func boundFields[A any](t *testing.T, build func(*options, *A) *cobra.Command, newAction func(*action.Config) *A) map[string][]string {
	t.Helper()
	o := &options{cfg: &action.Config{}}
	snapshot := func(a *A) map[string]any {
		m := map[string]reflect.Value{}
		fields(reflect.ValueOf(a).Elem(), "", m)
		out := map[string]any{}
		for k, v := range m {
			out[k] = v.Interface()
		}
		return out
	}
	fresh := newAction(o.cfg)
	cmd := build(o, fresh)
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	defaults := snapshot(fresh)
	byField := map[string][]string{}
	for field := range defaults {
		byField[field] = nil
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		a := newAction(o.cfg)
		c := build(o, a)
		arg := fmt.Sprintf("--%s=%s", f.Name, nonDefault(t, f))
		if err := c.ParseFlags([]string{arg}); err != nil {
			t.Fatalf("%s %s: %v", cmd.Name(), arg, err)
		}
		var changed []string
		for field, v := range snapshot(a) {
			if !reflect.DeepEqual(v, defaults[field]) {
				changed = append(changed, field)
			}
		}
		if len(changed) > 1 {
			t.Errorf("%s %s changed %d options, want one: %v", cmd.Name(), arg, len(changed), changed)
		}
		for _, field := range changed {
			byField[field] = append(byField[field], f.Name)
		}
	})
	return byField
}

// controllerOnly are the deploy options only kubeplug's controller sets: it
// adopts what its installation's spec.adopt says, and words its refusals as
// the installation's fields.
var controllerOnly = []string{"DeployOptions.Adopt", "DeployOptions.Remedies.Adopt", "DeployOptions.Remedies.AllowDowngrade"}

// TestFlagsBindEveryOption: the commands bind their flags straight into the
// action they run, so every option of the action has exactly one flag; an option
// added to the action without a flag, or a flag bound to a copy, fails here.
func TestFlagsBindEveryOption(t *testing.T) {
	check := func(t *testing.T, byField map[string][]string, unbound ...string) {
		t.Helper()
		for _, field := range slices.Sorted(func(yield func(string) bool) {
			for k := range byField {
				if !yield(k) {
					return
				}
			}
		}) {
			flags := byField[field]
			switch {
			case slices.Contains(unbound, field):
				if len(flags) > 0 {
					t.Errorf("option %s is listed as unbound, but flags %v set it", field, flags)
				}
			case strings.HasSuffix(field, "Target.Flags"):
				// kubectl's kubeconfig flag set, bound whole (genericclioptions).
				if len(flags) < 10 {
					t.Errorf("option %s is set by flags %v, want kubectl's whole kubeconfig flag set", field, flags)
				}
			case field == "ProviderOptions":
				// Typed settings of the providers (provider.Option), a flag each:
				// every one must still reach it.
				if len(flags) == 0 {
					t.Errorf("option %s is set by no flag", field)
				}
			case len(flags) != 1:
				t.Errorf("option %s is set by %d flags %v, want exactly one", field, len(flags), flags)
			}
		}
	}
	t.Run("apply", func(t *testing.T) {
		// Kubeconfig and Context are filled from Target.Flags when it runs.
		// Owner, an external lease, adoption and the remedies' wording are the
		// controller's (pkg/controller), not a user's.
		check(t, boundFields(t, applyCmd, action.NewApply), "Target.Kubeconfig", "Target.Context", "DeployOptions.Owner", "DeployOptions.Lease.External", "DeployOptions.Client", controllerOnly[0], controllerOnly[1], controllerOnly[2])
	})
	t.Run("up", func(t *testing.T) {
		check(t, boundFields(t, upCmd, action.NewUp), "DeployOptions.Owner", "DeployOptions.Lease.External", "DeployOptions.Client", controllerOnly[0], controllerOnly[1], controllerOnly[2])
	})
	t.Run("down", func(t *testing.T) {
		check(t, boundFields(t, downCmd, action.NewDown))
	})
	t.Run("apply and up deploy alike", func(t *testing.T) {
		o := &options{cfg: &action.Config{}}
		apply, up := newApplyCmd(o), newUpCmd(o)
		d := &action.DeployOptions{}
		c := &cobra.Command{}
		deployFlags(c, d)
		c.Flags().VisitAll(func(f *pflag.Flag) {
			for _, cmd := range []*cobra.Command{apply, up} {
				g := cmd.Flags().Lookup(f.Name)
				if g == nil || g.Usage != f.Usage || g.DefValue != f.DefValue {
					t.Errorf("%s: --%s is not bound as deployFlags binds it", cmd.Name(), f.Name)
				}
			}
		})
	})
}

// flagRE is a long flag named in help text.
var flagRE = regexp.MustCompile(`(^|[\s("'\x60\[])--([a-z][a-z0-9-]*)`)

// commandRE is a kubeplug command line named in help text.
var commandRE = regexp.MustCompile(`kubeplug((?: [a-z][a-z-]*)+)`)

// helpOwner returns the command whose flag a help sentence names after before:
// a command word right before the flag ("(apply --history-max)"), else the last
// "kubeplug CMD" of the sentence that names a real command, else c itself.
func helpOwner(root, c *cobra.Command, before string) *cobra.Command {
	if words := strings.Fields(before); len(words) > 0 {
		if found, _, err := root.Find([]string{strings.TrimLeft(words[len(words)-1], "('\x60")}); err == nil && found != root {
			return found
		}
	}
	for _, cm := range slices.Backward(commandRE.FindAllStringSubmatch(before, -1)) {
		if found, _, err := root.Find(strings.Fields(cm[1])); err == nil && found != root {
			return found
		}
	}
	return c
}

// TestHelpNamesOnlyRealFlags: every flag a command's help (Long and Example)
// names exists — on that command, or on the command the same sentence names
// before it ("'kubeplug apply' corrects this (--force-conflicts ...)").
func TestHelpNamesOnlyRealFlags(t *testing.T) {
	root := newRoot(Streams{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, func(string) (string, bool) { return "", false })
	clause := regexp.MustCompile(`[.;]\s`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		sentences := append(clause.Split(strings.ReplaceAll(c.Long, "\n", " "), -1), strings.Split(c.Example, "\n")...)
		for _, sentence := range sentences {
			for _, m := range flagRE.FindAllStringSubmatchIndex(sentence, -1) {
				name := sentence[m[4]:m[5]]
				target := helpOwner(root, c, sentence[:m[4]-len("--")])
				if target.Flag(name) == nil {
					t.Errorf("%q help names --%s, which %q does not have: %q", c.CommandPath(), name, target.CommandPath(), sentence)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
