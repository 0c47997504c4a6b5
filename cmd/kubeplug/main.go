// Command kubeplug extends a Kubernetes cluster's lifecycle with versioned plugins.
// See `kubeplug --help`.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/kubeplug/kubeplug/cmd/kubeplug/internal/leanstart" // --help and version before the heavy packages initialise
	"github.com/kubeplug/kubeplug/pkg/cmd"
	_ "github.com/kubeplug/kubeplug/pkg/nodeagent/s3fetch" // `kubeplug node` reads s3:// hook scripts
	_ "github.com/kubeplug/kubeplug/pkg/provider/all"      // every provider, registered at the binary's edge
)

// cleanupGrace is how long kubeplug may take to wind down after SIGINT or SIGTERM
// (releasing its lease, stopping a control plane it started) before it exits
// anyway: a signal always ends the process, even one blocked where no context
// reaches.
const cleanupGrace = 30 * time.Second

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	var got atomic.Value // the first signal, once one came
	go watchSignals(sigs, func() { cancel() }, &got, os.Stderr, cleanupGrace, os.Exit)
	code := cmd.Main(ctx, os.Args[1:], cmd.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	signal.Stop(sigs)
	cancel()
	os.Exit(exitAfter(code, &got))
}

// exitAfter is the exit status of a run that returned code: a run a signal
// stopped exits as the shell expects of one (130 after Ctrl-C), whatever error
// the cancelled work reported.
func exitAfter(code int, got *atomic.Value) int {
	if s, ok := got.Load().(os.Signal); ok && code != 0 {
		return exitCode(s)
	}
	return code
}

// watchSignals cancels the run at the first signal, and exits with 128+signal at a
// second one or when the run has not ended grace after the first.
func watchSignals(sigs <-chan os.Signal, cancel func(), got *atomic.Value, stderr io.Writer, grace time.Duration, exit func(int)) {
	first := <-sigs
	got.Store(first)
	cancel()
	_, _ = fmt.Fprintf(stderr, "kubeplug: %s: stopping (again to quit at once)\n", first)
	code := exitCode(first)
	select {
	case s := <-sigs:
		code = exitCode(s)
	case <-time.After(grace):
		_, _ = fmt.Fprintf(stderr, "kubeplug: still running %s after %s; quitting\n", grace, first)
	}
	exit(code)
}

func exitCode(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}
