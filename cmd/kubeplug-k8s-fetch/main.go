// Command kubeplug-k8s-fetch fills the local provider's binary cache with one
// Kubernetes version from its release locations (or $KUBEPLUG_K8S_MIRROR),
// verified against the published digests: `make up` runs it first and builds
// the binaries from Go modules (make localcluster) only when it fails.
//
//	kubeplug-k8s-fetch 1.37.1
//
// It exits 0 when every binary of the version is in the cache, 1 otherwise
// (one line on stderr says why), 2 on bad usage.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubeplug/kubeplug/internal/k8sversions"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kubeplug-k8s-fetch KUBERNETES_VERSION")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1]))
}

func run(ctx context.Context, version string) int {
	v, err := k8sversions.Default().Lookup(version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeplug-k8s-fetch:", err)
		return 2
	}
	c := &k8sversions.Cache{Progress: func(s string) { fmt.Fprintln(os.Stderr, s) }}
	dir, err := c.Ensure(ctx, v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubeplug-k8s-fetch: Kubernetes %s: %v\n", v.Kubernetes, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "Kubernetes %s in %s\n", v.Kubernetes, dir)
	return 0
}
