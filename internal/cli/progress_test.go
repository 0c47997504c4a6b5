package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/provider"
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
