package action_test

import (
	"testing"

	"github.com/kubeplug/kubeplug/pkg/config"
)

// load reads a cluster file as the CLI does; actions take the loaded spec.
func load(tb testing.TB, path string) *config.Cluster {
	tb.Helper()
	cl, l := config.Load(path)
	if cl == nil {
		tb.Fatalf("load %s: %v", path, l)
	}
	return cl
}
