package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const twoContexts = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: dev
  context: {cluster: c, user: u}
- name: prod
  context: {cluster: c, user: u}
current-context: dev
`

// complete runs cobra's hidden completion command and returns the candidates
// and the directive line.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot(Streams{Out: &out, Err: &errb}, func(string) (string, bool) { return "", false })
	root.SetArgs(append([]string{"__complete"}, args...))
	if err := root.Execute(); err != nil {
		t.Fatalf("__complete %v: %v (%s)", args, err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

func TestCompletion(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"apply", "status", "history", "rollback", "uninstall"} {
		got, _ := complete(t, cmd, "--kubeconfig", kc, "--context", "")
		if strings.Join(got, ",") != "dev,prod" {
			t.Errorf("%s --context: got %q, want dev and prod", cmd, got)
		}
	}
	// The cluster does not answer: no plugin names, no file names, no error.
	for _, args := range [][]string{{"history", ""}, {"uninstall", ""}, {"rollback", "cert-manager", "--to-revision", ""}} {
		got, directive := complete(t, append([]string{"--kubeconfig", kc}, args...)...)
		if len(got) != 0 || directive != ":4" {
			t.Errorf("%v against an unreachable cluster: got %q %s, want nothing and :4 (no file completion)", args, got, directive)
		}
	}
	got, _ := complete(t, "status", "-o", "")
	if strings.Join(got, ",") != "text,json,yaml,name,jsonpath=" {
		t.Errorf("-o: got %q", got)
	}
	got, _ = complete(t, "completion", "")
	if !strings.Contains(strings.Join(got, ","), "bash") || !strings.Contains(strings.Join(got, ","), "fish") {
		t.Errorf("completion: got %q, want bash, zsh, fish, powershell", got)
	}
}
