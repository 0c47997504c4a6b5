package live_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/cmd/internal/live"
	"github.com/kubeplug/kubeplug/test/harness/livetest"
)

// TestDisplay drives a display on a real pseudo-terminal and checks what the
// screen shows: lines in progress with their bars and times, log lines above
// them, finished items as one permanent line each, nothing left in progress
// after Close.
func TestDisplay(t *testing.T) {
	term := livetest.NewTerminal(t, 100, 20)
	d := live.New(term.TTY, live.Options{RefreshRate: 20 * time.Millisecond})
	start := time.Now().Add(-2 * time.Second)
	d.Set("stage", live.Item{Name: "deploy", Text: "wave 1 of 2", Since: start})
	d.Set("plugin/a", live.Item{Name: "plugin a 0.1.0", Text: "applied 4/4, ready 1/4", Current: 1, Total: 4, Since: start, Order: 2})
	d.Set("plugin/b", live.Item{Name: "plugin bee 1.0.0", Text: "applying", Since: start, Order: 2})
	d.Set("lease", live.Item{Name: "lease", Text: "held by apply on host/42", Order: 1})
	if !term.WaitFor("plugin bee 1.0.0", 5*time.Second) {
		t.Fatalf("no live line for plugin bee:\n%s", term.Screen)
	}
	vis := term.Screen.Visible()
	order := []string{"deploy", "lease", "plugin a 0.1.0", "plugin bee"}
	if len(vis) != len(order) {
		t.Fatalf("want %d live lines, see:\n%s", len(order), strings.Join(vis, "\n"))
	}
	for i, want := range order {
		if !strings.Contains(vis[i], want) {
			t.Errorf("line %d is %q, want it to show %q", i, vis[i], want)
		}
	}
	if !strings.Contains(vis[2], " 2.") || !strings.Contains(vis[2], "s [====>             ] applied 4/4, ready 1/4") {
		t.Errorf("plugin a's line lacks its bar or time: %q", vis[2])
	}
	// The names are one aligned column.
	if strings.Index(vis[3], "applying") != strings.Index(vis[2], "[") || strings.Index(vis[0], "wave") != strings.Index(vis[2], "[") {
		t.Errorf("columns not aligned:\n%s", strings.Join(vis, "\n"))
	}

	_, _ = d.Write([]byte("level=WARN msg=\"a log line\"\n"))
	d.Set("plugin/b", live.Item{Name: "plugin bee 1.0.0", Text: "applied 2/2", Current: 2, Total: 2, Since: start, Order: 2})
	d.Finish("plugin/a", "✓ plugin a 0.1.0 ready (4 object(s), 2.0s)")
	d.Finish("lease", "")
	// Never a moment when the finished item shows beside its permanent line.
	for range 100 {
		if vis := strings.Join(term.Screen.Visible(), "\n"); strings.Contains(vis, "✓ plugin a") && strings.Contains(vis, "ready 1/4") {
			t.Fatalf("plugin a shown finished and in progress at once:\n%s", vis)
		}
		time.Sleep(3 * time.Millisecond)
	}
	if !term.WaitFor("✓ plugin a", 5*time.Second) || !term.WaitFor("=>] applied 2/2", 5*time.Second) {
		t.Fatalf("finish or the new bar not shown:\n%s", term.Screen)
	}
	time.Sleep(100 * time.Millisecond)
	vis = term.Screen.Visible()
	want := []string{"level=WARN", "✓ plugin a 0.1.0 ready", "deploy", "plugin bee"}
	if len(vis) != len(want) {
		t.Fatalf("want %d lines, see:\n%s", len(want), strings.Join(vis, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(vis[i], w) {
			t.Errorf("line %d is %q, want it to show %q", i, vis[i], w)
		}
	}

	d.Close()
	d.Println("after close")
	term.Drain()
	got := term.Screen.Lines()
	want = []string{"level=WARN msg=\"a log line\"", "✓ plugin a 0.1.0 ready (4 object(s), 2.0s)", "after close"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("after Close the screen shows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDisplayNarrow: a line longer than the terminal is cut to its width, so
// that no line wraps and the redraw stays in place.
func TestDisplayNarrow(t *testing.T) {
	term := livetest.NewTerminal(t, 40, 10)
	d := live.New(term.TTY, live.Options{RefreshRate: 20 * time.Millisecond})
	defer d.Close()
	d.Set("p", live.Item{Name: "plugin with-a-long-name", Text: "waiting on Deployment.apps/web (InProgress: Available: 0/1)", Current: 1, Total: 3})
	d.Set("q", live.Item{Name: "q", Text: "second"})
	if !term.WaitFor("second", 5*time.Second) {
		t.Fatalf("not drawn:\n%s", term.Screen)
	}
	for range 5 {
		time.Sleep(50 * time.Millisecond)
		vis := term.Screen.Visible()
		if len(vis) != 2 {
			t.Fatalf("want 2 lines, see:\n%s", strings.Join(vis, "\n"))
		}
		if !strings.HasSuffix(vis[0], "…") {
			t.Errorf("long line not cut: %q", vis[0])
		}
	}
}

func TestElapsed(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0.0s", 1234 * time.Millisecond: "1.2s", 59*time.Second + 940*time.Millisecond: "59.9s",
		125 * time.Second: "2m05s", -time.Second: "0.0s",
	} {
		if got := live.Elapsed(d); got != want {
			t.Errorf("Elapsed(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestDisplayLiveText: an item's Live text is asked again at every redraw.
func TestDisplayLiveText(t *testing.T) {
	term := livetest.NewTerminal(t, 60, 5)
	d := live.New(term.TTY, live.Options{RefreshRate: 20 * time.Millisecond})
	defer d.Close()
	var n atomic.Int32
	d.Set("x", live.Item{Name: "lease", Live: func() string { return fmt.Sprintf("expires in %ds", 30-n.Add(1)/10) }})
	if !term.WaitFor("expires in 30s", 5*time.Second) || !term.WaitFor("expires in 29s", 5*time.Second) {
		t.Fatalf("the live text does not change:\n%s", term.Screen)
	}
}
