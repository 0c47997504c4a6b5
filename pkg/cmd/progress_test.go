package cmd

import (
	"bytes"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/stage"
	"github.com/kubeplug/kubeplug/test/harness/livetest"
)

// TestQuietProgress: -q keeps failures and interrupts, and drops every other
// progress line; without it they are all there, uncoloured off a terminal.
func TestQuietProgress(t *testing.T) {
	events := []deploy.Event{
		{Type: deploy.WaveStarted, Message: "a"},
		{Type: deploy.PluginReady, Plugin: "a", Ready: 1, Total: 1},
		{Type: deploy.PluginFailed, Plugin: "b", Message: "broken"},
		{Type: deploy.PluginInterrupted, Plugin: "c", Message: "context canceled"},
	}
	for _, quiet := range []bool{false, true} {
		var errb bytes.Buffer
		o := &options{streams: Streams{Out: &bytes.Buffer{}, Err: &errb}, output: "text", quiet: quiet,
			getenv: func(string) (string, bool) { return "", false }}
		p := newProgress(o)
		for _, e := range events {
			e.Time = time.Now()
			p.event(e)
		}
		p.providerEvent(provider.Event{Time: time.Now(), Step: "control-plane", Message: "starting"})
		out := errb.String()
		for _, want := range []string{"b: FAILED: broken", "c: interrupted: context canceled"} {
			if !strings.Contains(out, want) {
				t.Errorf("quiet=%v: output lacks %q:\n%s", quiet, want, out)
			}
		}
		for _, line := range []string{"a: ready 1/1", "control-plane: starting"} {
			if got := strings.Contains(out, line); got == quiet {
				t.Errorf("quiet=%v: %q printed=%v:\n%s", quiet, line, got, out)
			}
		}
		if strings.Contains(out, "\033[") {
			t.Errorf("colour off a terminal:\n%q", out)
		}
	}
}

// progressEvents is a run with something of everything the progress shows.
func progressEvents(t0 time.Time) ([]deploy.Event, []provider.Event) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	return []deploy.Event{
			{Time: at(0), Type: deploy.LeaseWaiting, Holder: "host/42", Operation: "apply", Expires: at(20000), Message: "waited 0s of up to 1m0s"},
			{Time: at(100), Type: deploy.LeaseTaken, Operation: "apply", Message: "took the cluster's operation lease"},
			{Time: at(200), Type: deploy.WaveStarted, Wave: 1, Total: 5, Message: "2 plugin(s)"},
			{Time: at(300), Type: deploy.PluginApplied, Wave: 1, Plugin: "hello", Applied: 4, Total: 4},
			{Time: at(400), Type: deploy.ObjectReady, Wave: 1, Plugin: "hello", Object: "ConfigMap/default/a", Ready: 1, Total: 4},
			{Time: at(500), Type: deploy.ObjectWaiting, Wave: 1, Plugin: "hello", Object: "Deployment.apps/default/web", Message: "InProgress: Available: 0/1"},
			{Time: at(600), Type: deploy.APIRetrying, Server: "https://127.0.0.1:6443", Attempt: 2, Attempts: 9, Message: "connection refused"},
			{Time: at(700), Type: deploy.APIRetried, Server: "https://127.0.0.1:6443", Attempt: 4, Attempts: 9, Message: "answered"},
			{Time: at(800), Type: deploy.PluginApplied, Wave: 1, Plugin: "broken", Applied: 0, Total: 1},
			{Time: at(900), Type: deploy.PluginFailed, Wave: 1, Plugin: "broken", Message: "apply ConfigMap/default/Not_A_Name: invalid name"},
			{Time: at(2300), Type: deploy.PluginReady, Wave: 1, Plugin: "hello", Ready: 4, Total: 4},
		}, []provider.Event{
			{Time: at(0), Step: "control-plane", Message: "starting the control plane"},
			{Time: at(10), Step: "control-plane", Item: "etcd", Message: "etcd starting"},
			{Time: at(800), Step: "control-plane", Item: "etcd", Message: "etcd ready in 790ms", Done: true},
			{Time: at(900), Step: "image", Item: "10.0.0.1:5000/pause:3.10", Message: "pushing 10.0.0.1:5000/pause:3.10"},
			{Time: at(950), Step: "image", Item: "10.0.0.1:5000/pause:3.10", Complete: 1000, Total: 4000, Message: "pushing 10.0.0.1:5000/pause:3.10: 1000 of 4000 bytes"},
			{Time: at(990), Step: "image", Item: "10.0.0.1:5000/pause:3.10", Done: true, Message: "pushed 10.0.0.1:5000/pause:3.10"},
		}
}

// TestPlainProgress: off a terminal each event is one plain line, with no
// escape byte.
func TestPlainProgress(t *testing.T) {
	var errb bytes.Buffer
	o := &options{streams: Streams{Out: &bytes.Buffer{}, Err: &errb}, output: "text", getenv: func(string) (string, bool) { return "", false }}
	p := newProgress(o)
	events, pevents := progressEvents(time.Now())
	for _, e := range pevents {
		p.providerEvent(e)
	}
	for _, e := range events {
		p.event(e)
	}
	p.close()
	out := errb.String()
	for _, want := range []string{
		"control-plane: starting the control plane [",
		"control-plane: etcd starting [",
		"control-plane: etcd ready in 790ms [",
		"image: pushing 10.0.0.1:5000/pause:3.10 [",
		"image: pushed 10.0.0.1:5000/pause:3.10 [",
		"waiting for the cluster's operation lease: apply by host/42 holds it (expires in ",
		"took the cluster's operation lease [",
		"wave 1: 2 plugin(s), 5 object(s) [",
		"  hello: applied 4/4\n",
		"  hello: waiting on Deployment.apps/default/web (InProgress: Available: 0/1)\n",
		"the API server https://127.0.0.1:6443 does not answer (try 2 of 9: connection refused); retrying [",
		"the API server https://127.0.0.1:6443 answers again (after 4 tries) [",
		"  broken: FAILED: apply ConfigMap/default/Not_A_Name: invalid name\n",
		"  hello: ready 4/4 [",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "1000 of 4000") {
		t.Errorf("a byte count printed as a plain line:\n%s", out)
	}
	if n := strings.Count(out, "\n"); n != len(events)+len(pevents)-2 { // ObjectReady and the byte count print none
		t.Errorf("%d lines for %d events:\n%s", n, len(events)+len(pevents)-2, out)
	}
	if strings.ContainsRune(out, '\033') {
		t.Errorf("escape byte off a terminal:\n%q", out)
	}
}

// TestProgressModes: on a terminal the progress is live unless --no-progress,
// -q, -o json, $CI, TERM=dumb or KUBEPLUG_PROGRESS=plain says otherwise; then
// no escape byte reaches the terminal (with NO_COLOR, not even a colour).
func TestProgressModes(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		noProgress bool
		live       bool
	}{
		{name: "terminal", live: true},
		{name: "--no-progress", noProgress: true},
		{name: "CI", env: map[string]string{"CI": "true"}},
		{name: "TERM=dumb", env: map[string]string{"TERM": "dumb"}},
		{name: "KUBEPLUG_PROGRESS=plain", env: map[string]string{"KUBEPLUG_PROGRESS": "plain"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			term := livetest.NewTerminal(t, 120, 30)
			env := map[string]string{"NO_COLOR": "1"}
			maps.Copy(env, tt.env)
			o := &options{streams: Streams{Out: &bytes.Buffer{}, Err: term.TTY}, output: "text", noProgress: tt.noProgress,
				getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
			if got := o.liveProgress(); got != tt.live {
				t.Fatalf("live = %v, want %v", got, tt.live)
			}
			p := newProgress(o)
			events, _ := progressEvents(time.Now())
			for _, e := range events {
				p.event(e)
			}
			p.close()
			term.Drain()
			if raw := term.Screen.Raw(); bytes.ContainsRune(raw, '\033') != tt.live {
				t.Errorf("escape bytes written: %v, want %v:\n%q", !tt.live, tt.live, raw)
			}
		})
	}
}

// TestLiveProgress drives the live display through a real pseudo-terminal and
// checks what a person sees: a line per plugin in progress with its bar and
// what its wait waits on, the lease and retry lines, log lines above the
// display, one permanent line per finished plugin, failures in full, and
// nothing in progress left after close.
func TestLiveProgress(t *testing.T) {
	term := livetest.NewTerminal(t, 160, 30)
	o := &options{cfg: &action.Config{}, streams: Streams{Out: &bytes.Buffer{}, Err: term.TTY}, output: "text",
		getenv: func(k string) (string, bool) { return map[string]string{"NO_COLOR": "1"}[k], k == "NO_COLOR" }}
	o.initConfig()
	p := newProgress(o)
	if p.live == nil {
		t.Fatal("no live display on a terminal")
	}
	events, pevents := progressEvents(time.Now())
	seen := func(want ...string) {
		t.Helper()
		for _, w := range want {
			if !term.WaitFor(w, 5*time.Second) {
				t.Fatalf("the screen does not show %q:\n%s", w, term.Screen)
			}
		}
	}
	p.providerEvent(pevents[1]) // etcd starting
	seen("control-plane ")
	p.providerEvent(pevents[3]) // a push starts
	p.providerEvent(pevents[4]) // a quarter of its bytes
	seen("push 10.0.0.1:5000/pause:3.10")
	seen("s [====>             ] 1.0 kB of 4.0 kB")
	p.providerEvent(pevents[5]) // pushed
	seen("✓ pushed 10.0.0.1:5000/pause:3.10")
	p.stage(engine.StageEvent{Stage: stage.Deploy, Waves: 2})
	p.event(events[0]) // lease waiting
	seen("deploy", "etcd", "starting", "waiting for the cluster's operation lease: apply by host/42 holds it (expires in ")
	for _, e := range events[1:8] { // up to the retries' end
		p.event(e)
	}
	p.event(deploy.Event{Time: time.Now(), Type: deploy.APIRetrying, Server: "https://127.0.0.1:7443", Attempt: 3, Attempts: 9, Message: "EOF"})
	o.cfg.Logger.Warn("a warning while the display runs")
	seen("s wave 1 of 2 started", "s [====>             ] applied 4/4, ready 1/4, waiting on Deployment.apps/default/web (InProgress: Available: 0/1)",
		"s https://127.0.0.1:7443 does not answer: try 3 of 9 failed (EOF); retrying",
		"✓ took the cluster's operation lease after waiting", "✓ the API server https://127.0.0.1:6443 answers again (after 4 tries)")
	for _, e := range events[8:] {
		p.event(e)
	}
	p.providerEvent(pevents[2])
	seen("✓ plugin hello ready (4 object(s), 2.0s)", "✓ etcd ready in 790ms", "✗ plugin broken FAILED: apply ConfigMap/default/Not_A_Name: invalid name")
	p.close()
	term.Drain()
	got := term.Screen.Lines()
	want := []string{
		"✓ pushed 10.0.0.1:5000/pause:3.10",
		"✓ took the cluster's operation lease after waiting 0.1s",
		"✓ the API server https://127.0.0.1:6443 answers again (after 4 tries)",
		`level=WARN msg="a warning while the display runs"`,
		"✗ plugin broken FAILED: apply ConfigMap/default/Not_A_Name: invalid name",
		"✓ plugin hello ready (4 object(s), 2.0s)",
		"✓ etcd ready in 790ms",
	}
	var clean []string
	for _, l := range got {
		if i := strings.Index(l, "level=WARN"); i >= 0 {
			l = l[i:] // the log line's time varies
		}
		clean = append(clean, l)
	}
	if strings.Join(clean, "\n") != strings.Join(want, "\n") {
		t.Errorf("the screen after close:\n%s\nwant:\n%s", strings.Join(clean, "\n"), strings.Join(want, "\n"))
	}
}

// TestForcedLiveProgress: KUBEPLUG_PROGRESS=live draws the live display on a
// stderr that is no terminal, 80 columns wide; --no-progress still wins.
func TestForcedLiveProgress(t *testing.T) {
	for _, noProgress := range []bool{false, true} {
		var errb bytes.Buffer
		o := &options{streams: Streams{Out: &bytes.Buffer{}, Err: &errb}, output: "text", noProgress: noProgress,
			getenv: func(k string) (string, bool) { return map[string]string{progressEnv: "live"}[k], k == progressEnv }}
		p := newProgress(o)
		if (p.live != nil) == noProgress {
			t.Fatalf("--no-progress=%v: live display %v", noProgress, p.live != nil)
		}
		events, _ := progressEvents(time.Now())
		for _, e := range events {
			p.event(e)
			time.Sleep(5 * time.Millisecond)
		}
		p.close()
		if noProgress {
			if bytes.ContainsRune(errb.Bytes(), '\033') {
				t.Errorf("escape bytes with --no-progress:\n%q", errb.String())
			}
			continue
		}
		s := livetest.NewScreen(80, 30)
		_, _ = s.Write(bytes.ReplaceAll(errb.Bytes(), []byte("\n"), []byte("\r\n")))
		got := strings.Join(s.Lines(), "\n")
		for _, want := range []string{"✓ plugin hello ready (4 object(s), 2.0s)", "✗ plugin broken FAILED: apply ConfigMap/default/Not_A_Name"} {
			if !strings.Contains(got, want) {
				t.Errorf("the screen lacks %q:\n%s", want, got)
			}
		}
		if strings.Contains(got, "applied 4/4, ready") {
			t.Errorf("a line in progress left after close:\n%s", got)
		}
	}
}

func TestBytesText(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 4_300_000: "4.3 MB", 2_500_000_000: "2.5 GB"} {
		if got := bytesText(n); got != want {
			t.Errorf("bytesText(%d) = %q, want %q", n, got, want)
		}
	}
}
