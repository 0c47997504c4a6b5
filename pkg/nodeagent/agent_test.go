package nodeagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
)

// hook is a test hook: a script body (run via the script path) or a command.
type hook struct {
	name, at, behavior, timeout, when, script string
	command                                   []string
}

// machine writes a root with a hooks manifest and the hooks' scripts, in order.
func machine(t testing.TB, hooks ...hook) string {
	t.Helper()
	root := t.TempDir()
	var m hookspec.Manifest
	for _, h := range hooks {
		if h.at == "" {
			h.at = hookspec.PhaseBeforeNodeup
		}
		e := hookspec.Hook{Plugin: "p", Name: h.name, At: h.at, Command: h.command, Behavior: h.behavior, Timeout: h.timeout, When: h.when}
		if h.script != "" {
			e.Script = hookspec.HooksDir + "/p/" + h.name
			if e.Command == nil {
				e.Command = []string{e.Script}
			}
			writeFile(t, filepath.Join(root, e.Script), h.script)
		}
		m.Hooks = append(m.Hooks, e)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, hookspec.HooksManifestPath), string(b))
	return root
}

func writeFile(t testing.TB, file, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newAgent(t testing.TB, opts nodeagent.Options) *nodeagent.Agent {
	t.Helper()
	if opts.Node.Name == "" {
		opts.Node.Name = "node-1"
	}
	if opts.KillGrace == 0 {
		opts.KillGrace = 200 * time.Millisecond
	}
	a, err := nodeagent.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func statuses(r *nodeagent.Report) string {
	var s []string
	for _, h := range r.Hooks {
		s = append(s, h.Name+"="+string(h.Status))
	}
	return strings.Join(s, " ")
}

// waitFile waits for a file a hook writes, failing the test after a while.
func waitFile(t testing.TB, file string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(file); err == nil && len(b) > 0 && strings.HasSuffix(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("%s was never written", file)
	return ""
}

// gone says whether pid has ended: no longer in /proc, or a zombie waiting for a
// reaper that containers' init may never be.
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

func assertGone(t testing.TB, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if gone(pid) {
			return
		}
	}
	t.Errorf("process %d outlived its hook", pid)
}

func TestBehaviors(t *testing.T) {
	for _, behavior := range []string{hookspec.BehaviorSyncEnforce, hookspec.BehaviorSyncBypass, hookspec.BehaviorAsyncEnforce, hookspec.BehaviorAsyncBypass} {
		for _, fail := range []bool{false, true} {
			name := behavior + "/succeeds"
			script := "echo hello\necho oops >&2\n"
			if fail {
				name = behavior + "/fails"
				script += "exit 3\n"
			}
			t.Run(name, func(t *testing.T) {
				root := machine(t,
					hook{name: "first", behavior: behavior, script: script},
					hook{name: "second", script: "true\n"},
				)
				rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
				if rep == nil {
					t.Fatalf("no report: %v", err)
				}
				first := rep.Hooks[0]
				if first.Stdout != "hello\n" || first.Stderr != "oops\n" {
					t.Errorf("output tails %q, %q", first.Stdout, first.Stderr)
				}
				enforced := strings.HasSuffix(behavior, "-enforce")
				wantFirst, wantSecond, wantCode := nodeagent.StatusSucceeded, nodeagent.StatusSucceeded, 0
				if fail {
					wantFirst, wantCode = nodeagent.StatusFailed, 3
					if behavior == hookspec.BehaviorSyncEnforce {
						wantSecond = nodeagent.StatusNotRun
					}
				}
				if first.Status != wantFirst || rep.Hooks[1].Status != wantSecond {
					t.Errorf("statuses %s, expected first=%s second=%s", statuses(rep), wantFirst, wantSecond)
				}
				if first.ExitCode == nil || *first.ExitCode != wantCode {
					t.Errorf("exit code %v, expected %d", first.ExitCode, wantCode)
				}
				var he *nodeagent.HookError
				switch {
				case fail && enforced:
					if !errors.As(err, &he) {
						t.Fatalf("error %v, expected a HookError", err)
					}
					if he.Hook != "first" || he.Plugin != "p" || he.Phase != hookspec.PhaseBeforeNodeup || he.Node != "node-1" {
						t.Errorf("error names %+v", he)
					}
					if want := "hook first of plugin p failed in phase beforeNodeup on node node-1: exit status 3"; err.Error() != want {
						t.Errorf("error %q, expected %q", err, want)
					}
					if !rep.Failed {
						t.Error("report not failed")
					}
				case err != nil:
					t.Errorf("unexpected error: %v", err)
				case rep.Failed:
					t.Error("report failed for a bypassed or no failure")
				}
			})
		}
	}
}

func TestTimeoutKillsTheGroup(t *testing.T) {
	for _, behavior := range []string{hookspec.BehaviorSyncEnforce, hookspec.BehaviorAsyncBypass} {
		t.Run(behavior, func(t *testing.T) {
			// The hook's child ignores nothing, but the hook itself traps SIGTERM to
			// show that SIGKILL follows the grace period.
			root := machine(t, hook{name: "slow", behavior: behavior, timeout: "300ms",
				script: "trap '' TERM\nsleep 300 &\necho $! > child.pid\nwait\n"})
			start := time.Now()
			rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("run took %v", took)
			}
			if rep == nil || rep.Hooks[0].Status != nodeagent.StatusTimedOut {
				t.Fatalf("report %+v, error %v", rep, err)
			}
			if rep.Hooks[0].Reason != "timed out after 300ms" || *rep.Hooks[0].ExitCode != -1 {
				t.Errorf("reason %q, exit code %d", rep.Hooks[0].Reason, *rep.Hooks[0].ExitCode)
			}
			if (err != nil) != (behavior == hookspec.BehaviorSyncEnforce) {
				t.Errorf("error %v", err)
			}
			pid, perr := strconv.Atoi(waitFile(t, filepath.Join(root, "child.pid")))
			if perr != nil {
				t.Fatal(perr)
			}
			assertGone(t, pid)
		})
	}
}

func TestCancel(t *testing.T) {
	root := machine(t,
		hook{name: "bg", behavior: hookspec.BehaviorAsyncEnforce, script: "sleep 300 &\necho $! > bg.pid\nwait\n"},
		hook{name: "slow", script: "sleep 300 &\necho $! > child.pid\nwait\n"},
		hook{name: "later", script: "true\n"},
	)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		waitFile(t, filepath.Join(root, "child.pid"))
		waitFile(t, filepath.Join(root, "bg.pid"))
		cancel()
	}()
	rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(ctx, hookspec.PhaseBeforeNodeup)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, expected it to wrap context.Canceled", err)
	}
	if got, want := statuses(rep), "bg=canceled slow=canceled later=not-run"; got != want {
		t.Errorf("statuses %s, expected %s", got, want)
	}
	for _, f := range []string{"child.pid", "bg.pid"} {
		pid, err := strconv.Atoi(waitFile(t, filepath.Join(root, f)))
		if err != nil {
			t.Fatal(err)
		}
		assertGone(t, pid)
	}
}

func TestWhen(t *testing.T) {
	tests := []struct {
		name, when, version string
		labels              map[string]string
		want                nodeagent.Status
		reason, warning     string
	}{
		{name: "empty", when: "", want: nodeagent.StatusSucceeded},
		{name: "true", when: "node.pool == 'workers' && node.role == 'worker' && cluster.name == 'demo'", want: nodeagent.StatusSucceeded},
		{name: "false", when: "node.role == 'control-plane'", want: nodeagent.StatusSkipped, reason: `when "node.role == 'control-plane'" is false`},
		{name: "label", when: "'gpu' in node.labels && node.labels['gpu'] == 'a100'", labels: map[string]string{"gpu": "a100"}, want: nodeagent.StatusSucceeded},
		{name: "missing label is an error", when: "node.labels['gpu'] == 'a100'", want: nodeagent.StatusFailed, reason: "no such key: gpu"},
		{name: "versionAtLeast is semantic", when: "versionAtLeast(cluster.kubernetesVersion, '1.30')", version: "1.9.0", want: nodeagent.StatusSkipped},
		{name: "versionAtLeast true", when: "versionAtLeast(cluster.kubernetesVersion, '1.30')", version: "v1.37.2", want: nodeagent.StatusSucceeded},
		{name: "semver ordering", when: "semver(cluster.kubernetesVersion) >= semver('1.10') && semver('1.9') < semver('1.10') && semver(cluster.kubernetesVersion).minor() == 37", version: "1.37.2", want: nodeagent.StatusSucceeded},
		{name: "semver equality", when: "semver('1.30') == semver('1.30.0')", want: nodeagent.StatusSucceeded},
		{name: "bad version", when: "versionAtLeast(cluster.kubernetesVersion, '1.30')", version: "latest", want: nodeagent.StatusFailed, reason: `"latest" is not a version`},
		{name: "string comparison warns", when: "cluster.kubernetesVersion >= '1.30'", version: "1.37.2", want: nodeagent.StatusSucceeded, warning: "compares cluster.kubernetesVersion as a string"},
		{name: "syntax error", when: "node.pool ==", want: nodeagent.StatusFailed, reason: "compile when"},
		{name: "unknown field", when: "node.zone == 'a'", want: nodeagent.StatusFailed, reason: "undefined field 'zone'"},
		{name: "not a bool", when: "node.pool", want: nodeagent.StatusFailed, reason: "is of type string, expected bool"},
		{name: "type error", when: "node.pool > 3", want: nodeagent.StatusFailed, reason: "found no matching overload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := machine(t, hook{name: "h", behavior: hookspec.BehaviorSyncBypass, when: tt.when, script: "true\n"})
			a := newAgent(t, nodeagent.Options{
				Root:    root,
				Cluster: hookspec.Cluster{Name: "demo", KubernetesVersion: tt.version},
				Node:    hookspec.Node{Pool: "workers", Role: "worker", Labels: tt.labels},
			})
			rep, err := a.Run(t.Context(), hookspec.PhaseBeforeNodeup)
			if err != nil {
				t.Fatal(err)
			}
			h := rep.Hooks[0]
			if h.Status != tt.want || !strings.Contains(h.Reason, tt.reason) || !strings.Contains(h.Warning, tt.warning) || (tt.warning == "") != (h.Warning == "") {
				t.Errorf("status %s, reason %q, warning %q; expected %s, %q, %q", h.Status, h.Reason, h.Warning, tt.want, tt.reason, tt.warning)
			}
		})
	}
}

func TestWhenInvalidEnforcedFailsTheNode(t *testing.T) {
	root := machine(t, hook{name: "h", when: "node.pool ==", script: "true\n"}, hook{name: "next", script: "true\n"})
	rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	var he *nodeagent.HookError
	if !errors.As(err, &he) || !strings.Contains(he.Reason, "compile when") {
		t.Fatalf("error %v, expected a HookError about the condition", err)
	}
	if got, want := statuses(rep), "h=failed next=not-run"; got != want {
		t.Errorf("statuses %s, expected %s", got, want)
	}
}

func TestScriptAndCommand(t *testing.T) {
	const env = `echo "$PWD $KUBEPLUG_ROOT $KUBEPLUG_PHASE $KUBEPLUG_PLUGIN $KUBEPLUG_HOOK $KUBEPLUG_NODE"`
	tests := []struct {
		name string
		h    hook
		want string // stdout, with ROOT for the root
	}{
		{name: "script via sh", h: hook{script: env + "\n"}, want: "ROOT ROOT afterNodeup p h node-1\n"},
		{name: "script with #!", h: hook{script: "#!/bin/sh -e\n" + env + "\n"}, want: "ROOT ROOT afterNodeup p h node-1\n"},
		{name: "command", h: hook{command: []string{"/bin/sh", "-c", env + "; echo \"$0 $1\"", "a", "b c"}}, want: "ROOT ROOT afterNodeup p h node-1\na b c\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.h.name, tt.h.at = "h", hookspec.PhaseAfterNodeup
			root := machine(t, tt.h)
			rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseAfterNodeup)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.ReplaceAll(tt.want, "ROOT", root); rep.Hooks[0].Stdout != want {
				t.Errorf("stdout %q, expected %q", rep.Hooks[0].Stdout, want)
			}
		})
	}
}

func TestPhaseSelectsItsHooksInOrder(t *testing.T) {
	root := machine(t,
		hook{name: "a", at: hookspec.PhaseAfterDeploy, script: "echo a >> order\n"},
		hook{name: "b", at: hookspec.PhaseBeforeNodeup, script: "echo b >> order\n"},
		hook{name: "c", at: hookspec.PhaseAfterDeploy, script: "echo c >> order\n"},
	)
	rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseAfterDeploy)
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(rep); got != "a=succeeded c=succeeded" {
		t.Errorf("statuses %s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "order")); string(b) != "a\nc\n" {
		t.Errorf("ran %q", b)
	}
}

func TestAsyncRunsAlongsideTheNextSyncHook(t *testing.T) {
	// The async hook waits for a file that only the sync hook after it writes, and the
	// sync hook waits for the async one to have started: each finishes only if they
	// overlap.
	root := machine(t,
		hook{name: "bg", behavior: hookspec.BehaviorAsyncEnforce, timeout: "10s", script: "touch bg-started\nuntil [ -f fg-done ]; do sleep 0.02; done\necho bg > bg-done\n"},
		hook{name: "fg", timeout: "10s", script: "until [ -f bg-started ]; do sleep 0.02; done\ntouch fg-done\n"},
	)
	rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(rep); got != "bg=succeeded fg=succeeded" {
		t.Errorf("statuses %s", got)
	}
	// Run waited for the async hook.
	if _, err := os.Stat(filepath.Join(root, "bg-done")); err != nil {
		t.Errorf("async hook not finished when Run returned: %v", err)
	}
}

func TestAsyncEnforceFailureFailsTheNodeAtTheEnd(t *testing.T) {
	root := machine(t,
		hook{name: "bg", behavior: hookspec.BehaviorAsyncEnforce, script: "exit 1\n"},
		hook{name: "fg", script: "sleep 0.2\n"},
		hook{name: "last", script: "true\n"},
	)
	rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	var he *nodeagent.HookError
	if !errors.As(err, &he) || he.Hook != "bg" {
		t.Fatalf("error %v, expected hook bg's", err)
	}
	if got, want := statuses(rep), "bg=failed fg=succeeded last=succeeded"; got != want {
		t.Errorf("statuses %s, expected %s", got, want)
	}
}

func TestRerunSkipsSucceededHooks(t *testing.T) {
	root := machine(t,
		hook{name: "once", script: "echo run >> once.log\n"},
		hook{name: "flaky", behavior: hookspec.BehaviorSyncBypass, script: "echo run >> flaky.log\n[ -f fixed ]\n"},
	)
	count := func(f string) int {
		b, _ := os.ReadFile(filepath.Join(root, f))
		return strings.Count(string(b), "run")
	}
	run := func(force bool) string {
		t.Helper()
		rep, err := newAgent(t, nodeagent.Options{Root: root, Force: force}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
		if err != nil {
			t.Fatal(err)
		}
		return statuses(rep)
	}
	steps := []struct {
		name        string
		prepare     func()
		force       bool
		want        string
		once, flaky int
	}{
		{name: "first run", want: "once=succeeded flaky=failed", once: 1, flaky: 1},
		{name: "re-run skips the success, retries the failure", want: "once=skipped flaky=failed", once: 1, flaky: 2},
		{name: "the failure is fixed", prepare: func() { writeFile(t, filepath.Join(root, "fixed"), "") }, want: "once=skipped flaky=succeeded", once: 1, flaky: 3},
		{name: "nothing left to do", want: "once=skipped flaky=skipped", once: 1, flaky: 3},
		{name: "force", force: true, want: "once=succeeded flaky=succeeded", once: 2, flaky: 4},
		{name: "a changed script runs again", prepare: func() {
			writeFile(t, filepath.Join(root, hookspec.HooksDir, "p", "once"), "echo run >> once.log\necho changed\n")
		}, want: "once=succeeded flaky=skipped", once: 3, flaky: 4},
	}
	for _, s := range steps {
		if s.prepare != nil {
			s.prepare()
		}
		if got := run(s.force); got != s.want || count("once.log") != s.once || count("flaky.log") != s.flaky {
			t.Errorf("%s: statuses %s, runs %d/%d; expected %s, %d/%d", s.name, got, count("once.log"), count("flaky.log"), s.want, s.once, s.flaky)
		}
	}
}

func TestReportFile(t *testing.T) {
	root := machine(t,
		hook{name: "ok", script: "echo fine\n"},
		hook{name: "skip", when: "false", script: "true\n"},
		hook{name: "bad", behavior: hookspec.BehaviorSyncBypass, script: "echo broken >&2\nexit 2\n"},
	)
	rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, nodeagent.ReportsDir, "beforeNodeup.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got nodeagent.Report
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Phase != "beforeNodeup" || got.Node != "node-1" || got.Root != root || got.Failed || got.FinishedAt.Before(got.StartedAt) {
		t.Errorf("report header %+v", got)
	}
	if statuses(&got) != statuses(rep) || statuses(&got) != "ok=succeeded skip=skipped bad=failed" {
		t.Errorf("report statuses %s", statuses(&got))
	}
	if got.Hooks[0].Stdout != "fine\n" || got.Hooks[2].Stderr != "broken\n" || got.Hooks[2].Reason != "exit status 2" || *got.Hooks[2].ExitCode != 2 {
		t.Errorf("report hooks %+v", got.Hooks)
	}
	if got.Hooks[1].ExitCode != nil || !got.Hooks[1].StartedAt.IsZero() {
		t.Errorf("a skipped hook has run details: %+v", got.Hooks[1])
	}
	if !strings.Contains(string(b), `"duration": "`) {
		t.Errorf("durations are not Go durations:\n%s", b)
	}
}

func TestOutputTail(t *testing.T) {
	root := machine(t, hook{name: "loud", script: "i=0; while [ $i -lt 100 ]; do echo line$i; i=$((i+1)); done\n"})
	rep, err := newAgent(t, nodeagent.Options{Root: root, OutputTail: 16}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	if err != nil {
		t.Fatal(err)
	}
	// The last 16 bytes, marked as cut.
	if got := rep.Hooks[0].Stdout; got != "…7\nline98\nline99\n" {
		t.Errorf("tail %q", got)
	}
}

func TestManifestErrors(t *testing.T) {
	tests := []struct {
		name, manifest, field, msg string
	}{
		{name: "not json", manifest: "{", msg: "expected the hooks manifest as JSON"},
		{name: "timeout", manifest: `{"hooks":[{"plugin":"p","name":"h","at":"beforeNodeup","command":["true"],"timeout":"soon"}]}`, field: "hooks[0].timeout", msg: `expected a positive Go duration like 90s or 5m, found "soon"`},
		{name: "behavior", manifest: `{"hooks":[{"plugin":"p","name":"h","at":"beforeNodeup","command":["true"],"behavior":"later"}]}`, field: "hooks[0].behavior", msg: "expected one of sync-enforce"},
		{name: "phase", manifest: `{"hooks":[{"plugin":"p","name":"h","at":"boot","command":["true"]}]}`, field: "hooks[0].at", msg: `found "boot"`},
		{name: "nothing to run", manifest: `{"hooks":[{"plugin":"p","name":"h","at":"beforeNodeup"}]}`, field: "hooks[0].command", msg: "a hook needs a command, a script or a url"},
		{name: "script outside the hooks dir", manifest: `{"hooks":[{"plugin":"p","name":"h","at":"beforeNodeup","script":"/etc/passwd"}]}`, field: "hooks[0].script", msg: "expected /var/lib/kubeplug/hooks/p/h"},
		{name: "duplicate", manifest: `{"hooks":[{"plugin":"p","name":"h","at":"beforeNodeup","command":["true"]},{"plugin":"p","name":"h","at":"afterNodeup","command":["true"]}]}`, field: "hooks[1].name", msg: "hook p/h is also hooks[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeFile(t, filepath.Join(root, hookspec.HooksManifestPath), tt.manifest)
			rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
			var me *hookspec.ManifestError
			if !errors.As(err, &me) || rep != nil {
				t.Fatalf("report %v, error %v; expected a ManifestError", rep, err)
			}
			if me.Path != filepath.Join(root, hookspec.HooksManifestPath) || me.Field != tt.field || !strings.Contains(me.Err.Error(), tt.msg) {
				t.Errorf("error %v; expected field %q and %q", err, tt.field, tt.msg)
			}
		})
	}
}

func TestNoManifestIsNoHooks(t *testing.T) {
	root := t.TempDir()
	rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseAfterNodeup)
	if err != nil || len(rep.Hooks) != 0 {
		t.Fatalf("report %+v, error %v", rep, err)
	}
	if _, err := nodeagent.New(nodeagent.Options{Root: filepath.Join(root, "missing")}); err == nil {
		t.Error("a missing root was accepted")
	}
	if _, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), "boot"); err == nil || !strings.Contains(err.Error(), `phase "boot": expected one of beforeNodeup, afterNodeup, afterDeploy`) {
		t.Errorf("unknown phase: %v", err)
	}
}

func TestManifestFactsAreDefaults(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, hookspec.HooksManifestPath), `{
  "cluster": {"name": "demo", "kubernetesVersion": "1.37.2"},
  "node": {"pool": "workers", "role": "worker", "labels": {"zone": "a"}},
  "hooks": [{"plugin": "p", "name": "h", "at": "beforeNodeup", "command": ["true"],
    "when": "cluster.name == 'demo' && versionAtLeast(cluster.kubernetesVersion, '1.37') && node.pool == 'edge' && node.labels.zone == 'a'"}]}`)
	rep, err := newAgent(t, nodeagent.Options{Root: root, Node: hookspec.Node{Pool: "edge"}}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	if err != nil || rep.Hooks[0].Status != nodeagent.StatusSucceeded {
		t.Fatalf("report %+v, error %v", rep, err)
	}
}

func TestOneRunPerPhase(t *testing.T) {
	root := machine(t, hook{name: "hold", script: "touch held\nuntil [ -f release ]; do sleep 0.02; done\n"})
	done := make(chan error, 1)
	go func() {
		_, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(root, "held")); err == nil {
			break
		}
	}
	_, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	if !errors.Is(err, nodeagent.ErrLocked) {
		t.Errorf("second run: %v, expected ErrLocked", err)
	}
	// Another phase is not held up.
	if _, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseAfterDeploy); err != nil {
		t.Errorf("other phase: %v", err)
	}
	writeFile(t, filepath.Join(root, "release"), "")
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// TestSyncHookLeftoversAreEnded: a sync hook that succeeds but leaves processes
// running — in its group, or in a session of its own — has them ended, and its
// result says so.
func TestSyncHookLeftoversAreEnded(t *testing.T) {
	root := machine(t, hook{name: "daemon", script: "sleep 300 </dev/null >/dev/null 2>&1 &\necho $! > bg.pid\n" +
		"setsid sh -c 'echo $$ > sid.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &\nsleep 0.2\n"})
	rep, err := newAgent(t, nodeagent.Options{Root: root}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	if err != nil || rep.Hooks[0].Status != nodeagent.StatusSucceeded {
		t.Fatalf("report %+v, error %v", rep, err)
	}
	if w := rep.Hooks[0].Warning; !strings.Contains(w, "2 process(es) left behind and ended") || !strings.Contains(w, "sleep 300") {
		t.Errorf("warning %q", w)
	}
	for _, f := range []string{"bg.pid", "sid.pid"} {
		pid, perr := strconv.Atoi(waitFile(t, filepath.Join(root, f)))
		if perr != nil {
			t.Fatal(perr)
		}
		assertGone(t, pid)
	}
}
