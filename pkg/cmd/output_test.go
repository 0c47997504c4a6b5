package cmd

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/deploy"
)

func TestPrintFormats(t *testing.T) {
	h := []deploy.Revision{
		{Revision: 1, Version: "1.0.0", Status: "Superseded", Description: "install", Objects: 3},
		{Revision: 2, Version: "1.1.0", Status: "Ready", Description: "upgrade", Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Objects: 4},
	}
	files := renderedFiles(map[string][]byte{"b/x.yaml": []byte("b"), "a.yaml": []byte("a")})
	for _, tc := range []struct {
		output string
		v      any
		want   string
	}{
		{"json", h[0], "{\n  \"revision\": 1,\n  \"version\": \"1.0.0\",\n  \"status\": \"Superseded\",\n  \"description\": \"install\",\n  \"objects\": 3\n}\n"},
		{"yaml", h[0], "description: install\nobjects: 3\nrevision: 1\nstatus: Superseded\nversion: 1.0.0\n"},
		{"name", h, "revision/1\nrevision/2\n"},
		{"name", files, "file/a.yaml\nfile/b/x.yaml\n"},
		{"name", map[string]string{"plugin": "cert-manager", "status": "Ready"}, "plugin/cert-manager\n"},
		{"jsonpath={.items[*].version}", h, "1.0.0 1.1.0\n"},
		{"jsonpath={range .items[*]}{.revision}={.status}{\"\\n\"}{end}", h, "1=Superseded\n2=Ready\n"},
		{"jsonpath={.kind}", files, "RenderedFiles\n"},
		{"text", h, "text\n"},
		{"name", map[string]any{"removed": []string{"a", "b"}, "dryRun": true}, "plugin/a\nplugin/b\n"},
		{"name", ApplySummary{APIVersion: APIVersion, Kind: "ApplyResult", ApplyResult: &action.ApplyResult{Plugins: []string{"x"}}}, "plugin/x\n"},
		{"jsonpath={.kind} {.failed} {.applied}", ApplySummary{APIVersion: APIVersion, Kind: "ApplyResult", Failed: true, ApplyResult: &action.ApplyResult{Applied: 4}}, "ApplyResult true 4\n"},
		{"name", RenderDiff{Files: []action.FileDiff{{Path: "a", Change: "added"}}}, "file/a\n"},
	} {
		var out bytes.Buffer
		o := &options{output: tc.output, streams: Streams{Out: &out, Err: &bytes.Buffer{}}}
		if err := checkOutput(tc.output, "history"); err != nil {
			t.Fatalf("checkOutput(%q): %v", tc.output, err)
		}
		if err := o.print(tc.v, textWriter("text\n")); err != nil {
			t.Fatalf("-o %s: %v", tc.output, err)
		}
		if out.String() != tc.want {
			t.Errorf("-o %s: got\n%q\nwant\n%q", tc.output, out.String(), tc.want)
		}
	}
}

func textWriter(s string) func(w io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

func TestPrintErrors(t *testing.T) {
	for _, tc := range []struct {
		output string
		v      any
		want   string
	}{
		{"name", []map[string]string{{"version": "1"}}, "-o name: this result has no names"},
		{"name", map[string]int{"removed": 0}, "has removed"},
		{"jsonpath={.nope}", map[string]int{"a": 1}, "nope is not found"},
	} {
		o := &options{output: tc.output, streams: Streams{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}}
		err := o.print(tc.v, textWriter(""))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("-o %s: got error %v, want one containing %q", tc.output, err, tc.want)
		}
	}
}

func TestCheckOutput(t *testing.T) {
	for _, tc := range []struct{ output, command, want string }{
		{"out", "render", "render writes files into --output-dir DIR"},
		{"./out/x.json", "status", "a format, not a file"},
		{"xml", "status", "expected text, json, yaml, name or jsonpath=TEMPLATE"},
		{"jsonpath={.a", "status", "invalid --output"},
	} {
		err := checkOutput(tc.output, tc.command)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkOutput(%q, %s): got %v, want an error containing %q", tc.output, tc.command, err, tc.want)
		}
	}
}

// otherTool says whether a flag after before belongs to another program's
// command line (kubectl apply --server-side, an exec check's bin/smoke-test --quick).
func otherTool(before string) bool {
	last, tool := -1, false
	for _, p := range []string{"kubeplug ", "kubectl ", "helm ", "bin/"} {
		if i := strings.LastIndex(before, p); i > last {
			last, tool = i, p != "kubeplug "
		}
	}
	return tool
}

// readmeCommandRE is a kubeplug command line in the README: the command words.
var readmeCommandRE = regexp.MustCompile("kubeplug((?: [a-z][a-z-]*)+)")

// TestReadmeNamesOnlyRealFlags: every --flag README.md names exists on the
// command the same line names before it (a row of the command table, a
// command line), or, in prose that names no command, on some command.
func TestReadmeNamesOnlyRealFlags(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	root := newRoot(Streams{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, func(string) (string, bool) { return "", false })
	anywhere := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		// Cobra adds --help to every command when it runs one.
		c.InitDefaultHelpFlag()
		c.Flags().VisitAll(func(f *pflag.Flag) { anywhere[f.Name] = true })
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) { anywhere[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	checked := 0
	for i, line := range strings.Split(string(b), "\n") {
		for _, m := range flagRE.FindAllStringSubmatchIndex(line, -1) {
			name := line[m[4]:m[5]]
			if otherTool(line[:m[4]]) {
				continue
			}
			checked++
			var owner *cobra.Command
			for _, cm := range readmeCommandRE.FindAllStringSubmatch(line[:m[4]], -1) {
				if found, _, err := root.Find(strings.Fields(cm[1])); err == nil && found != root {
					owner = found
				}
			}
			switch {
			case owner != nil && owner.Flag(name) == nil:
				t.Errorf("README.md:%d names --%s, which %q does not have: %s", i+1, name, owner.CommandPath(), line)
			case owner == nil && !anywhere[name]:
				t.Errorf("README.md:%d names --%s, which no kubeplug command has: %s", i+1, name, line)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("found only %d flags in README.md: the pattern is broken", checked)
	}
}
