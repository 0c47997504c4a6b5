package cmd

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/bad")

// badDir holds the bad-input corpus, relative to the repository root. Every
// directory in it whose name does not start with "_" is one case:
//
//   - a plugin case holds a package and runs as `kubeplug plugin lint DIR`;
//   - a cluster case holds cluster.yaml and runs as
//     `kubeplug config validate -f DIR/cluster.yaml` plus the flags in DIR/args
//     (--no-builtin when there is no args file).
//
// DIR/env holds NAME=value lines, the whole environment the command sees.
// DIR/secret holds strings, one a line, that must not appear in the output.
// DIR/expected.golden holds the command, its exit status, stdout and stderr.
const badDir = "testdata/bad"

// generated creates, at test time, the files too large to commit. Each one is
// removed when the case ends.
var generated = map[string]func(t *testing.T, dir string){
	"plugin-file-too-large": func(t *testing.T, dir string) {
		bigFile(t, filepath.Join(dir, "manifests", "big.yaml"), 50<<20)
	},
	"plugin-manifest-too-large": func(t *testing.T, dir string) {
		var b strings.Builder
		b.WriteString("apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: demo, version: 1.0.0}\nspec: {}\n")
		for b.Len() <= 1<<20 {
			b.WriteString("# padding: a manifest this large is refused before it is parsed\n")
		}
		writeTemp(t, filepath.Join(dir, "plugin.yaml"), []byte(b.String()))
	},
}

// fileLevel lists the cases whose problems are about files rather than their
// content, so some diagnostics carry no line and column.
var fileLevel = map[string]bool{
	"plugin-file-too-large":          true,
	"plugin-manifest-too-large":      true,
	"plugin-symlink-escape":          true,
	"plugin-symlink-chain-escape":    true,
	"plugin-manifest-symlink-escape": true,
	"cluster-duplicate-plugins":      true,
}

var (
	// diagRE is one diagnostic line: FILE:LINE:COL: message, or FILE: message.
	diagRE = regexp.MustCompile(`^([^:\s]+)(?::(\d+):(\d+))?: \S`)
	// summaryRE matches the lines a command prints that are not diagnostics.
	summaryRE = regexp.MustCompile(`^\d+ plugin\(s\) checked`)
)

func TestBadInput(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	entries, err := os.ReadDir(badDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		n++
		name := e.Name()
		t.Run(name, func(t *testing.T) {
			dir := badDir + "/" + name
			if gen, ok := generated[name]; ok {
				gen(t, dir)
			}
			args, cluster := badArgs(t, dir)
			env := readLines(t, filepath.Join(dir, "env"))
			getenv := func(k string) (string, bool) {
				for _, kv := range env {
					if n, v, ok := strings.Cut(kv, "="); ok && n == k {
						return v, true
					}
				}
				return "", false
			}
			var stdout, stderr bytes.Buffer
			code := runNoPanic(t, args, &stdout, &stderr, getenv)
			got := fmt.Sprintf("$ kubeplug %s\nexit status %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())

			if code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			diags := stdout.String()
			if cluster {
				diags = stderr.String()
			}
			checkDiagLines(t, dir, diags, !fileLevel[name])
			for _, s := range readLines(t, filepath.Join(dir, "secret")) {
				if strings.Contains(got, s) {
					t.Errorf("the output shows the sensitive value %q:\n%s", s, got)
				}
			}

			golden := filepath.Join(dir, "expected.golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./pkg/cmd -run TestBadInput -update)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (rewrite with -update)\n--- got\n%s\n--- want\n%s", golden, got, want)
			}
		})
	}
	if n < 30 {
		t.Errorf("the corpus has %d cases, want at least 30", n)
	}
}

// badArgs returns the command line for the case in dir and whether it is a
// cluster case.
func badArgs(t *testing.T, dir string) ([]string, bool) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "cluster.yaml")); err != nil {
		return []string{"plugin", "lint", dir}, false
	}
	args := []string{"config", "validate", "-f", dir + "/cluster.yaml"}
	extra, err := os.ReadFile(filepath.Join(dir, "args"))
	switch {
	case os.IsNotExist(err):
		return append(args, "--no-builtin"), true
	case err != nil:
		t.Fatal(err)
	}
	return append(args, strings.Fields(string(extra))...), true
}

func runNoPanic(t *testing.T, args []string, stdout, stderr *bytes.Buffer, getenv func(string) (string, bool)) (code int) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("kubeplug %s panicked: %v", strings.Join(args, " "), r)
		}
	}()
	return run(context.Background(), args, Streams{In: strings.NewReader(""), Out: stdout, Err: stderr}, getenv)
}

// checkDiagLines asserts that every diagnostic names a file inside the case
// directory and, when positioned, a line and a column from 1.
func checkDiagLines(t *testing.T, dir, out string, positioned bool) {
	t.Helper()
	lines := 0
	for line := range strings.Lines(out) {
		line = strings.TrimSuffix(line, "\n")
		if summaryRE.MatchString(line) {
			continue
		}
		lines++
		m := diagRE.FindStringSubmatch(line)
		switch {
		case m == nil:
			t.Errorf("not a FILE:LINE:COL: diagnostic: %q", line)
			continue
		case m[1] != dir && !strings.HasPrefix(m[1], dir+"/"):
			t.Errorf("diagnostic names %s, outside the case directory %s: %q", m[1], dir, line)
		case positioned && m[2] == "":
			t.Errorf("diagnostic has no line and column: %q", line)
		case m[2] == "0" || m[3] == "0":
			t.Errorf("diagnostic has a zero line or column: %q", line)
		}
	}
	if lines == 0 {
		t.Errorf("no diagnostic printed")
	}
}

func readLines(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// bigFile makes a sparse file of size bytes, removed when the test ends.
func bigFile(t *testing.T, file string, size int64) {
	t.Helper()
	writeTemp(t, file, nil)
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
}

// writeTemp writes a file into the corpus that only lives for the test.
func writeTemp(t *testing.T, file string, data []byte) {
	t.Helper()
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(file); err != nil {
			t.Errorf("remove generated file: %v", err)
		}
	})
}
