package dashboard

import (
	"context"
	"os"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// runCLI, set in a child's environment, makes this test binary the kubeplug
// command line (the helper-process pattern): "an apply in another process".
const runCLI = "KUBEPLUG_DASHBOARD_TEST_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(runCLI) == "1" {
		os.Exit(cmd.Main(context.Background(), os.Args[1:], cmd.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
	}
	os.Exit(testcluster.Run(m))
}
