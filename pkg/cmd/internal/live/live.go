package live

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-runewidth"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Item is what the display shows of one thing in progress.
type Item struct {
	// Name is the left column ("plugin hello 0.1.0", "kube-apiserver"), aligned
	// across the items.
	Name string
	// Text says what the item is doing now.
	Text string
	// Live, when set, is asked for the text at every redraw instead: for a
	// text that changes by itself, such as a countdown. It must be quick.
	Live func() string
	// Current of Total, when Total is positive, draws a bar between the name
	// and the text.
	Current, Total int64
	// Since is when the item started; its line shows how long it has run.
	// Zero: no time.
	Since time.Time
	// Order places the item: lower first, and by when they were added among
	// the same order.
	Order int
}

// Options configure a Display.
type Options struct {
	// RefreshRate is how often the display is redrawn. Default 150ms.
	RefreshRate time.Duration
	// BarWidth is the width of a bar. Default 20.
	BarWidth int
	// Force draws on an output that is no terminal as if it were one of 80
	// columns: for terminals that cannot be told apart from a pipe, and tests.
	Force bool
}

// Display is a live progress display on a terminal. Its methods are safe for
// concurrent use; after Close they print straight to the terminal.
type Display struct {
	out  io.Writer
	opts Options
	p    *mpb.Progress

	mu     sync.Mutex
	items  map[string]*entry
	seq    int
	closed bool
}

// entry is one item's bar; the decorators read item at every redraw.
type entry struct {
	bar    *mpb.Bar
	hasBar bool
	prio   int
	item   atomic.Pointer[Item]
	// gone is set when the item finished: mpb draws a dropped bar once more,
	// which should then show nothing rather than the item beside its
	// permanent line.
	gone atomic.Bool
}

// New starts a display drawing on out, a terminal (mpb asks it for its width
// at every redraw) unless opts.Force. Close it when the command ends.
func New(out io.Writer, opts Options) *Display {
	if opts.RefreshRate <= 0 {
		opts.RefreshRate = 150 * time.Millisecond
	}
	if opts.BarWidth <= 0 {
		opts.BarWidth = 20
	}
	mo := []mpb.ContainerOption{mpb.WithOutput(out), mpb.WithRefreshRate(opts.RefreshRate), mpb.WithAutoRefresh()}
	if opts.Force {
		mo = append(mo, mpb.ForceTTY())
	}
	return &Display{out: out, opts: opts, p: mpb.New(mo...), items: map[string]*entry{}}
}

// Set shows item id as it, adding its line if it has none yet.
func (d *Display) Set(id string, it Item) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	e := d.items[id]
	if e != nil && e.hasBar != (it.Total > 0) {
		// A bar appears (or goes) when a total becomes known: a new line in
		// the same place.
		e.gone.Store(true)
		e.bar.Abort(true)
		e = &entry{prio: e.prio}
		d.items[id] = e
	}
	if e == nil {
		d.seq++
		e = &entry{prio: it.Order*1_000_000 + d.seq}
		d.items[id] = e
	}
	e.item.Store(&it)
	if e.bar != nil {
		if it.Total > 0 {
			e.bar.SetTotal(it.Total, false)
			e.bar.SetCurrent(min(it.Current, it.Total))
		}
		return
	}
	e.hasBar = it.Total > 0
	prio := e.prio
	// Columns: the name, how long the item has taken, the bar (if any), the
	// text. The text is cut to what the bar leaves of the terminal's width, so
	// that no line wraps: a wrapped line would break the redraw in place.
	name := decor.Any(func(decor.Statistics) string { return e.show(e.item.Load().name) }, decor.WC{C: decor.DSyncWidthR})
	took := decor.Any(func(decor.Statistics) string { return e.show(e.item.Load().elapsed) }, decor.WC{C: decor.DSyncWidth})
	reserve := 1 // the space before the text
	if e.hasBar {
		reserve = d.opts.BarWidth + 2 // the bar and a space either side
	}
	text := decor.Any(func(s decor.Statistics) string {
		// On a narrow terminal the text keeps at least half the width; the
		// bar shrinks.
		return e.show(func() string { return cut(e.item.Load().text(), max(s.AvailableWidth-reserve, s.AvailableWidth/2)) })
	})
	// Every bar is made with total 0, which never completes by itself: a
	// completed bar could not be removed (Abort ignores it). SetTotal sets the
	// total it draws.
	if e.hasBar {
		e.bar = d.p.New(0, mpb.BarStyle().Lbound("[").Rbound("]").Filler("=").Tip(">").Padding(" "),
			mpb.BarWidth(d.opts.BarWidth), mpb.BarFillerClearOnAbort(), mpb.BarPriority(prio),
			mpb.PrependDecorators(name, took), mpb.AppendDecorators(text))
		e.bar.SetTotal(it.Total, false)
		e.bar.SetCurrent(min(it.Current, it.Total))
		return
	}
	// No bar, and no spaces around it: the text starts where a bar does.
	spaced := decor.Any(func(s decor.Statistics) string {
		return e.show(func() string { return " " + cut(e.item.Load().text(), s.AvailableWidth-reserve) })
	})
	e.bar = d.p.New(0, mpb.NopStyle(), mpb.BarFillerTrim(), mpb.BarPriority(prio),
		mpb.PrependDecorators(name, took), mpb.AppendDecorators(spaced))
}

// cut cuts s to width columns, marking the cut with an ellipsis.
func cut(s string, width int) string {
	if width <= 0 {
		return ""
	}
	return runewidth.Truncate(s, width, "…")
}

// show is f() until the item is gone, then nothing.
func (e *entry) show(f func() string) string {
	if e.gone.Load() {
		return ""
	}
	return f()
}

// spinner frames, one per redraw period of 100ms.
var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func (it *Item) name() string {
	frame := spinner[(time.Now().UnixMilli()/100)%int64(len(spinner))]
	return frame + " " + it.Name
}

func (it *Item) text() string {
	if it.Live != nil {
		return it.Live()
	}
	return it.Text
}

// elapsed is how long the item has taken, after a space; empty without Since.
func (it *Item) elapsed() string {
	if it.Since.IsZero() {
		return ""
	}
	return " " + Elapsed(time.Since(it.Since))
}

// Elapsed formats a duration as a person reads it at a glance: 0.4s, 12.3s,
// 2m05s.
func Elapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", math.Max(d.Seconds(), 0))
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
}

// Finish removes item id's line, when it has one, and prints line above the
// display for good (nothing when line is empty).
func (d *Display) Finish(id, line string) {
	d.mu.Lock()
	if e := d.items[id]; e != nil {
		delete(d.items, id)
		e.gone.Store(true)
		if !d.closed {
			e.bar.Abort(true)
		}
	}
	d.mu.Unlock()
	if line != "" {
		d.Println(line)
	}
}

// Has says whether item id has a line.
func (d *Display) Has(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.items[id] != nil
}

// Println prints line above the display.
func (d *Display) Println(line string) {
	_, _ = d.Write([]byte(strings.TrimSuffix(line, "\n") + "\n"))
}

// Write prints b (whole lines, such as a log record) above the display at its
// next redraw.
func (d *Display) Write(b []byte) (int, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if !closed {
		n, err := d.p.Write(b)
		if !errors.As(err, new(mpb.ErrDone[*mpb.Progress])) {
			return n, err
		}
	}
	return d.out.Write(b)
}

// Close removes every line still in progress, draws the display a last time
// and stops it. Later calls print straight to the terminal.
func (d *Display) Close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	for id, e := range d.items {
		e.gone.Store(true)
		e.bar.Abort(true)
		delete(d.items, id)
	}
	d.closed = true
	d.mu.Unlock()
	d.p.Wait()
}
