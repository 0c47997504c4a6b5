package livetest

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// Terminal is a pseudo-terminal whose output a Screen shows.
type Terminal struct {
	// TTY is the terminal end a program writes to: a *os.File for which
	// term.IsTerminal holds.
	TTY *os.File
	// Screen shows what was written to TTY.
	Screen *Screen
	done   chan struct{}
	ptmx   *os.File
}

// NewTerminal opens a pseudo-terminal of width×height with a Screen reading it;
// the test's cleanup closes it.
func NewTerminal(t testing.TB, width, height int) *Terminal {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: uint16(width), Rows: uint16(height)}); err != nil {
		t.Fatal(err)
	}
	term := &Terminal{TTY: tty, Screen: NewScreen(width, height), done: make(chan struct{}), ptmx: ptmx}
	go func() {
		defer close(term.done)
		_, _ = io.Copy(term.Screen, ptmx)
	}()
	t.Cleanup(func() {
		_ = tty.Close()
		_ = ptmx.Close()
		<-term.done
	})
	return term
}

// Drain waits until the terminal's output is on the Screen: nothing came for a
// while after the last byte.
func (term *Terminal) Drain() {
	last := -1
	for {
		time.Sleep(100 * time.Millisecond)
		n := term.Screen.Written()
		if n == last {
			return
		}
		last = n
	}
}

// WaitFor waits up to timeout until some visible row contains want, and says
// whether one did.
func (term *Terminal) WaitFor(want string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, l := range term.Screen.Visible() {
			if strings.Contains(l, want) {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
