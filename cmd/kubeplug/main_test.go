package main

import (
	"io"
	"os"
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
			go watchSignals(sigs, func() { close(cancelled) }, io.Discard, 100*time.Millisecond, func(c int) { exited <- c })
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
			case <-time.After(5 * time.Second):
				t.Fatal("the process did not exit")
			}
		})
	}
}
