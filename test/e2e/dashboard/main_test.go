package dashboard

import (
	"context"
	"os"
	"testing"

	"github.com/kubeplug/kubeplug/internal/cli"
	"github.com/kubeplug/kubeplug/internal/testcluster"
)

// runCLI, set in a child's environment, makes this test binary the kubeplug
// command line (the helper-process pattern): "an apply in another process".
const runCLI = "KUBEPLUG_DASHBOARD_TEST_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(runCLI) == "1" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
	}
	os.Exit(testcluster.Run(m))
}
