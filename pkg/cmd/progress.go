package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/kubeplug/kubeplug/pkg/cmd/internal/live"
	"github.com/kubeplug/kubeplug/pkg/deploy"
	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// progressEnv asks for plain progress lines ("plain") or the live display
// ("live") whatever stderr is.
const progressEnv = "KUBEPLUG_PROGRESS"

// progress shows what a long command does, on stderr: a live display on a
// terminal (pkg/cmd/internal/live), else one plain line per event; with -o json one
// JSON object per event on stdout instead. Its methods are the actions' event
// hooks; close ends the live display, and must be called once the action
// returns, before anything else is printed (a nil *progress closes as well).
type progress struct {
	o     *options
	mu    sync.Mutex
	start time.Time
	// live is the live display; nil for plain lines.
	live *live.Display

	// What the live display shows (the plain lines need none of it).
	stageName  string
	stageSince time.Time
	wave       int // the furthest wave started
	waves      int
	plugins    map[string]*pluginProgress
	leaseSince time.Time
	retries    map[string]time.Time // when retries against a server began
	since      map[string]time.Time // when the provider's live items began
}

// pluginProgress is what the live display knows of a plugin deploying.
type pluginProgress struct {
	since                 time.Time
	applied, ready, total int
	waiting               string
}

// Orders of the live display's lines: the stage on top, then waits and
// retries, then what is being started, pushed and deployed.
const (
	orderStage = iota
	orderWait
	orderWork
)

func newProgress(o *options) *progress {
	p := &progress{o: o, start: time.Now(), plugins: map[string]*pluginProgress{}, retries: map[string]time.Time{}}
	if o.liveProgress() {
		p.live = live.New(o.streams.Err, live.Options{Force: !o.errTerminal()})
		o.errw.to(p.live)
	}
	return p
}

// close ends the live display: what is still in progress disappears, what
// finished stays. Log lines go straight to stderr again.
func (p *progress) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live != nil {
		p.o.errw.to(nil)
		p.live.Close()
		p.live = nil
	}
}

// liveProgress says whether progress is a live display: on a terminal, unless
// --no-progress, -q, -o json, $CI, TERM=dumb or KUBEPLUG_PROGRESS=plain asks
// for plain lines (or none). KUBEPLUG_PROGRESS=live asks for it on any stderr.
func (o *options) liveProgress() bool {
	if o.noProgress || o.quiet || o.output == "json" {
		return false
	}
	switch v, _ := o.getenv(progressEnv); v {
	case "plain":
		return false
	case "live":
		return true
	}
	if !o.errTerminal() || o.envSet("CI") {
		return false
	}
	t, _ := o.getenv("TERM")
	return t != "dumb"
}

// errTerminal says whether stderr is a terminal.
func (o *options) errTerminal() bool {
	f, ok := o.streams.Err.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// envSet says whether the environment variable name is set and not empty.
func (o *options) envSet(name string) bool {
	v, ok := o.getenv(name)
	return ok && v != ""
}

// ANSI colours for progress lines.
const (
	red    = "31"
	green  = "32"
	yellow = "33"
)

// paint colours s on a terminal, unless $NO_COLOR is set (no-color.org) or the
// terminal is dumb.
func (o *options) paint(color, s string) string {
	if !o.errTerminal() || o.envSet("NO_COLOR") {
		return s
	}
	if t, _ := o.getenv("TERM"); t == "dumb" {
		return s
	}
	return "\033[" + color + "m" + s + "\033[0m"
}

// errWriter is stderr for the logger: it prints above the live display while
// one runs, so that a log line never tears it.
type errWriter struct {
	mu   sync.Mutex
	w    io.Writer
	live io.Writer
}

func (e *errWriter) Write(b []byte) (int, error) {
	e.mu.Lock()
	w := e.w
	if e.live != nil {
		w = e.live
	}
	e.mu.Unlock()
	return w.Write(b)
}

// to sends what is written to w, or to stderr again when w is nil.
func (e *errWriter) to(w io.Writer) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.live = w
}

// line prints a plain progress line, or on the live display a permanent line
// above it.
func (p *progress) line(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if p.live != nil {
		p.live.Println(s)
		return
	}
	_, _ = fmt.Fprintln(p.o.streams.Err, s)
}

func (p *progress) elapsed(t time.Time) string {
	return t.Sub(p.start).Round(100 * time.Millisecond).String()
}

// event shows a deploy event.
//
// Branches: one case per kind of deploy event, each printing its own line.
func (p *progress) event(e deploy.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.o.output == "json" {
		b, _ := json.Marshal(e)
		_, _ = fmt.Fprintln(p.o.streams.Out, string(b))
		return
	}
	if p.o.quiet && e.Type != deploy.PluginFailed && e.Type != deploy.UninstallFailed && e.Type != deploy.PluginInterrupted {
		return
	}
	if p.live != nil {
		p.liveEvent(e)
		return
	}
	switch e.Type {
	case deploy.WaveStarted:
		p.line("wave %d: %s, %d object(s) [%s]", e.Wave, e.Message, e.Total, p.elapsed(e.Time))
	case deploy.PluginApplied:
		p.line("  %s: applied %d/%d", e.Plugin, e.Applied, e.Total)
	case deploy.ObjectWaiting:
		p.line("  %s: waiting on %s (%s)", e.Plugin, e.Object, e.Message)
	case deploy.PluginReady:
		p.line("  %s: %s %d/%d [%s]", e.Plugin, p.o.paint(green, "ready"), e.Ready, e.Total, p.elapsed(e.Time))
	case deploy.PluginPruned:
		p.line("  %s: pruned %d object(s) its new version no longer has", e.Plugin, e.Total)
	case deploy.ObjectKept:
		p.line("  %s: kept %s in the cluster (%s)", e.Plugin, e.Object, e.Message)
	case deploy.PluginFailed:
		p.line("  %s: %s: %s", e.Plugin, p.o.paint(red, "FAILED"), e.Message)
	case deploy.PluginInterrupted:
		p.line("  %s: %s: %s", e.Plugin, p.o.paint(yellow, "interrupted"), e.Message)
	case deploy.PluginRemoved, deploy.UninstallFailed:
		p.line("%s", p.removedLine(e))
	case deploy.LeaseWaiting:
		p.line("waiting for the cluster's operation lease: %s; %s [%s]", leaseHolder(e), e.Message, p.elapsed(e.Time))
	case deploy.LeaseTaken:
		p.line("%s [%s]", e.Message, p.elapsed(e.Time))
	case deploy.APIRetrying:
		p.line("the API server %s does not answer (try %d of %d: %s); retrying [%s]", e.Server, e.Attempt, e.Attempts, e.Message, p.elapsed(e.Time))
	case deploy.APIRetried:
		p.line("%s [%s]", retriedLine(e), p.elapsed(e.Time))
	}
}

func (p *progress) removedLine(e deploy.Event) string {
	switch {
	case e.Type == deploy.UninstallFailed:
		return fmt.Sprintf("  %s: uninstall %s: %s", e.Plugin, p.o.paint(red, "FAILED"), e.Message)
	case e.Message == "dry run":
		return fmt.Sprintf("  %s: would be uninstalled (%d object(s); the API server accepted each delete as a dry run)", e.Plugin, e.Total)
	}
	return fmt.Sprintf("  %s: uninstalled (%d object(s) deleted)", e.Plugin, e.Total)
}

// leaseHolder says who holds the lease a LeaseWaiting event waits for.
func leaseHolder(e deploy.Event) string {
	op, holder := e.Operation, e.Holder
	if op == "" {
		op = "an operation"
	}
	if holder == "" {
		holder = "an unknown holder"
	}
	s := op + " by " + holder + " holds it"
	if !e.Expires.IsZero() {
		s += fmt.Sprintf(" (expires in %s)", max(time.Until(e.Expires), 0).Round(time.Second))
	}
	return s
}

func retriedLine(e deploy.Event) string {
	if e.Message == "answered" {
		return fmt.Sprintf("the API server %s answers again (after %d tries)", e.Server, e.Attempt)
	}
	return fmt.Sprintf("the API server %s %s", e.Server, e.Message)
}

// liveEvent shows a deploy event on the live display: a line per plugin in
// progress (waves may overlap, so nothing is per wave but the stage line), one
// permanent line for each that finishes, failures in full.
//
// Branches: one case per kind of deploy event, each updating its own line of the
// live display.
func (p *progress) liveEvent(e deploy.Event) {
	d := p.live
	id := "plugin/" + e.Plugin
	pp := p.plugins[e.Plugin]
	if pp == nil && e.Plugin != "" {
		pp = &pluginProgress{since: e.Time}
		p.plugins[e.Plugin] = pp
	}
	switch e.Type {
	case deploy.WaveStarted:
		if e.Wave > p.wave {
			p.wave = e.Wave
			p.showStage()
		}
		return
	case deploy.PluginApplied:
		pp.applied, pp.total = e.Applied, e.Total
	case deploy.ObjectReady:
		pp.ready, pp.total = e.Ready, e.Total
		if pp.waiting != "" && strings.HasPrefix(pp.waiting, e.Object+" ") {
			pp.waiting = ""
		}
	case deploy.ObjectWaiting:
		pp.waiting = e.Object + " (" + e.Message + ")"
		if e.Total > 0 {
			pp.ready, pp.total = e.Ready, e.Total
		}
	case deploy.PluginReady:
		delete(p.plugins, e.Plugin)
		d.Finish(id, fmt.Sprintf("%s plugin %s ready (%d object(s), %s)", p.o.paint(green, "✓"), e.Plugin, e.Total, live.Elapsed(e.Time.Sub(pp.since))))
		return
	case deploy.PluginFailed:
		delete(p.plugins, e.Plugin)
		// The error names the plugin already.
		msg := strings.TrimPrefix(e.Message, "plugin "+e.Plugin+": ")
		d.Finish(id, fmt.Sprintf("%s plugin %s %s: %s", p.o.paint(red, "✗"), e.Plugin, p.o.paint(red, "FAILED"), msg))
		return
	case deploy.PluginInterrupted:
		delete(p.plugins, e.Plugin)
		d.Finish(id, fmt.Sprintf("%s plugin %s %s: %s", p.o.paint(yellow, "!"), e.Plugin, p.o.paint(yellow, "interrupted"), e.Message))
		return
	case deploy.PluginPruned:
		d.Println(fmt.Sprintf("  plugin %s: pruned %d object(s) its new version no longer has", e.Plugin, e.Total))
		return
	case deploy.ObjectKept:
		d.Println(fmt.Sprintf("  plugin %s: kept %s in the cluster (%s)", e.Plugin, e.Object, e.Message))
		return
	case deploy.PluginRemoved, deploy.UninstallFailed:
		delete(p.plugins, e.Plugin)
		d.Finish(id, p.removedLine(e))
		return
	case deploy.LeaseWaiting:
		if p.leaseSince.IsZero() {
			p.leaseSince = e.Time
		}
		// The holder's expiry counts down between the events (every 10s).
		d.Set("lease", live.Item{Name: "lease", Order: orderWait, Since: p.leaseSince,
			Live: func() string { return "waiting for the cluster's operation lease: " + leaseHolder(e) }})
		return
	case deploy.LeaseTaken:
		waited := e.Time.Sub(p.leaseSince)
		p.leaseSince = time.Time{}
		d.Finish("lease", fmt.Sprintf("%s took the cluster's operation lease after waiting %s", p.o.paint(green, "✓"), live.Elapsed(waited)))
		return
	case deploy.APIRetrying:
		since, ok := p.retries[e.Server]
		if !ok {
			since = e.Time
			p.retries[e.Server] = since
		}
		d.Set("retry/"+e.Server, live.Item{Name: "API server", Order: orderWait, Since: since,
			Text: fmt.Sprintf("%s does not answer: try %d of %d failed (%s); retrying", e.Server, e.Attempt, e.Attempts, e.Message)})
		return
	case deploy.APIRetried:
		delete(p.retries, e.Server)
		mark := p.o.paint(green, "✓")
		if e.Message != "answered" {
			mark = p.o.paint(red, "✗")
		}
		d.Finish("retry/"+e.Server, mark+" "+retriedLine(e))
		return
	default:
		return
	}
	text := fmt.Sprintf("applied %d/%d, ready %d/%d", pp.applied, pp.total, pp.ready, pp.total)
	if pp.waiting != "" {
		text += ", waiting on " + pp.waiting
	}
	d.Set(id, live.Item{Name: "plugin " + e.Plugin, Text: text, Current: int64(pp.ready), Total: int64(pp.total), Since: pp.since, Order: orderWork})
}

// showStage shows the stage line of the live display.
func (p *progress) showStage() {
	text := ""
	if p.wave > 0 {
		text = fmt.Sprintf("wave %d", p.wave)
		if p.waves > 0 {
			text += fmt.Sprintf(" of %d", p.waves)
		}
		text += " started"
	}
	p.live.Set("stage", live.Item{Name: p.stageName, Text: text, Since: p.stageSince, Order: orderStage})
}

// stage shows the start of each stage, and of each wave of the validate stage;
// the deploy stage's waves show their own progress.
func (p *progress) stage(e engine.StageEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.o.output == "json" {
		b, _ := json.Marshal(map[string]any{"type": "Stage", "time": time.Now(), "stage": e.Stage, "wave": e.Wave, "waves": e.Waves, "plugins": e.Plugins})
		_, _ = fmt.Fprintln(p.o.streams.Out, string(b))
		return
	}
	if p.o.quiet {
		return
	}
	if p.live != nil {
		if string(e.Stage) != p.stageName {
			p.stageName, p.stageSince, p.wave, p.waves = string(e.Stage), time.Now(), 0, e.Waves
		}
		if e.Stage == stage.Validate {
			p.wave = max(p.wave, e.Wave)
		}
		p.showStage()
		return
	}
	switch {
	case e.Stage == stage.Validate:
		p.line("validate, wave %d: %s [%s]", e.Wave, strings.Join(e.Plugins, ", "), p.elapsed(time.Now()))
	case e.Wave == 0:
		p.line("%s: %d wave(s) [%s]", e.Stage, e.Waves, p.elapsed(time.Now()))
	}
}

// providerEvent shows a provider's event.
func (p *progress) providerEvent(e provider.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.o.output == "json" {
		m := map[string]any{"type": "Provider", "time": e.Time, "step": e.Step, "node": e.Node, "message": e.Message}
		if e.Item != "" {
			m["item"], m["done"] = e.Item, e.Done
		}
		if e.Total > 0 {
			m["complete"], m["total"] = e.Complete, e.Total
		}
		b, _ := json.Marshal(m)
		_, _ = fmt.Fprintln(p.o.streams.Out, string(b))
		return
	}
	if p.o.quiet {
		return
	}
	if p.live != nil && e.Step != p.stageName {
		// The provider's steps (the control plane, the nodes, their hooks)
		// run between the stages: the stage line says which.
		p.stageName, p.stageSince, p.wave, p.waves = e.Step, e.Time, 0, 0
		p.showStage()
	}
	if p.live != nil && e.Item != "" {
		p.liveItem(e)
		return
	}
	if e.Message == "" || (e.Total > 0 && !e.Done) {
		return // a finished item without a word, or a count of bytes
	}
	line := e.Step + ": " + e.Message
	if e.Node != "" {
		line = e.Message
		if !strings.HasPrefix(line, "node "+e.Node) {
			line = "node " + e.Node + ": " + line
		}
	}
	if p.live != nil {
		p.live.Println(line)
		return
	}
	p.line("%s [%s]", line, p.elapsed(e.Time))
}

// liveItem shows a provider's event about one of several things its step
// works on at once: a control-plane component, a node joining, an image push.
func (p *progress) liveItem(e provider.Event) {
	id := e.Step + "/" + e.Item
	if e.Done {
		line := ""
		if e.Message != "" {
			mark := p.o.paint(green, "✓")
			if strings.Contains(e.Message, "failed") {
				mark = p.o.paint(red, "✗")
			}
			line = mark + " " + e.Message
		}
		p.live.Finish(id, line)
		return
	}
	it := live.Item{Name: e.Item, Text: strings.TrimPrefix(e.Message, e.Item+" "), Order: orderWork, Since: e.Time}
	if e.Node != "" {
		it.Name, it.Text = "node "+e.Node, strings.TrimPrefix(e.Message, "node "+e.Node+" ")
	}
	if e.Step == "image" {
		it.Name = "push " + e.Item
		it.Text = "pushing"
		if e.Total > 0 {
			it.Text = bytesText(e.Complete) + " of " + bytesText(e.Total)
			it.Current, it.Total = e.Complete, e.Total
		}
	}
	if old := p.itemSince(id); !old.IsZero() {
		it.Since = old
	}
	p.live.Set(id, it)
	p.since[id] = it.Since
}

// itemSince is when the live item id started, zero when it is new.
func (p *progress) itemSince(id string) time.Time {
	if p.since == nil {
		p.since = map[string]time.Time{}
	}
	if !p.live.Has(id) {
		delete(p.since, id)
	}
	return p.since[id]
}

// bytesText is n bytes for a person: 512 B, 3.4 MB.
func bytesText(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
