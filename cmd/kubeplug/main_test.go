package main

import (
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSignalsEndTheProcess checks that a signal ends kubeplug even when the run
// ignores its cancelled context: at once on a second signal, after the grace
// period otherwise.
func TestSignalsEndTheProcess(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second os.Signal
		want   int
	}{
		{"second signal", syscall.SIGINT, 130},
		{"grace period", nil, 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sigs := make(chan os.Signal, 2)
			cancelled := make(chan struct{})
			exited := make(chan int, 1)
			var got atomic.Value
			go watchSignals(sigs, func() { close(cancelled) }, &got, io.Discard, 100*time.Millisecond, func(c int) { exited <- c })
			sigs <- syscall.SIGTERM
			<-cancelled
			if tc.second != nil {
				sigs <- tc.second
			}
			select {
			case c := <-exited:
				if c != tc.want {
					t.Errorf("exit code %d, want %d", c, tc.want)
				}
				// A run that ended with an error after the signal exits as the
				// signal says; one that succeeded anyway exits 0.
				if c := exitAfter(1, &got); c != 143 {
					t.Errorf("exitAfter(1) = %d after SIGTERM, want 143", c)
				}
				if c := exitAfter(0, &got); c != 0 {
					t.Errorf("exitAfter(0) = %d, want 0", c)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the process did not exit")
			}
		})
	}
}
