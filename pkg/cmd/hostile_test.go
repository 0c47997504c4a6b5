package cmd

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestPasswordStdinIsBounded gives /dev/zero as standard input to every
// --password-stdin: each is an error naming the flag and the limit, within
// seconds, never an out-of-memory.
func TestPasswordStdinIsBounded(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"keygen", []string{"plugin", "keygen", "--password-stdin", "--output-key-prefix", dir + "/k"}, "--password-stdin: reading the password from standard input: file is larger than the 64 KiB limit"},
		{"sign", []string{"plugin", "sign", "--password-stdin", "--key", dir + "/none.key", dir + "/none.tgz"}, "--password-stdin: reading the password from standard input: file is larger than the 64 KiB limit"},
		{"registry", []string{"plugin", "push", "--username", "u", "--password-stdin", dir + "/none.tgz", "oci://127.0.0.1:1/p"}, "--password-stdin: cannot read the password from stdin: file is larger than the 64 KiB limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zero, err := os.Open("/dev/zero")
			if err != nil {
				t.Skip(err)
			}
			defer func() { _ = zero.Close() }()
			var out, errb bytes.Buffer
			start := time.Now()
			code := run(context.Background(), tc.args, Streams{In: zero, Out: &out, Err: &errb}, func(string) (string, bool) { return "", false })
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %s", took)
			}
			if code == 0 || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want an error saying %q", code, errb.String(), tc.want)
			}
		})
	}
}

// TestEveryFlagHasARule walks every command: a flag that holds a count (an
// integer) or a namespace must have its rule in flagrules.go, so that no new
// flag is taken on trust.
func TestEveryFlagHasARule(t *testing.T) {
	root := newRoot(Streams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard}, func(string) (string, bool) { return "", false })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			switch {
			case strings.Contains(f.Name, "namespace") && !namespaceFlags[f.Name]:
				t.Errorf("%s --%s names a namespace but has no rule in namespaceFlags", c.CommandPath(), f.Name)
			case strings.HasPrefix(f.Value.Type(), "int") || strings.HasPrefix(f.Value.Type(), "uint"):
				if !countFlags[f.Name] {
					t.Errorf("%s --%s is an integer (%s) but has no rule in countFlags", c.CommandPath(), f.Name, f.Value.Type())
				}
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// TestFlagsTakenOnTrust gives hostile values to every count and namespace flag
// (and a negative duration): each is refused naming the flag and the rule, and
// nothing is printed or done.
func TestFlagsTakenOnTrust(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"controller", "manifests", "--namespace", "Evil_NS/../kube-system"}, `--namespace "Evil_NS/../kube-system": a namespace must be a DNS label (RFC 1123)`},
		{[]string{"controller", "manifests", "--namespace", ""}, `--namespace "": a namespace must be a DNS label`},
		{[]string{"controller", "manifests", "--namespace", strings.Repeat("a", 64)}, `a namespace must be a DNS label`},
		{[]string{"controller", "manifests", "--replicas", "-5"}, "--replicas -5: a count must be a whole number of at least 1"},
		{[]string{"controller", "manifests", "--replicas", "0"}, "--replicas 0: a count must be a whole number of at least 1"},
		{[]string{"controller", "--concurrency", "-1"}, "--concurrency -1: a count must be"},
		{[]string{"controller", "--watch-namespace", "a/b"}, `--watch-namespace "a/b": a namespace must be a DNS label`},
		{[]string{"controller", "--leader-elect-namespace", "UP"}, `--leader-elect-namespace "UP": a namespace must be a DNS label`},
		{[]string{"controller", "--interval", "-1s"}, "--interval -1s: a duration must not be negative"},
		{[]string{"controller", "--shards", "0"}, "--shards 0: a count must be a whole number of at least 1"},
		{[]string{"controller", "--shards", "3", "--leader-elect"}, "[leader-elect shards] were all set"},
		{[]string{"apply", "-f", "none.yaml", "--history-max", "-3"}, "--history-max -3: a count must be"},
		{[]string{"rollback", "-f", "none.yaml", "demo", "--to-revision", "-2"}, "--to-revision -2: a count must be"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, func(string) (string, bool) { return "", false })
			if code == 0 || !strings.Contains(errb.String(), tc.want) || out.Len() > 0 {
				t.Fatalf("exit %d, stdout %d bytes, stderr %q; want a refusal saying %q", code, out.Len(), errb.String(), tc.want)
			}
		})
	}
}
