// Command kubeplug extends a Kubernetes cluster's lifecycle with versioned plugins.
// See `kubeplug --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubeplug/kubeplug/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
