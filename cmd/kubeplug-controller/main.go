// Command kubeplug-controller is the program of the controller's image: the
// kubeplug command line with only its controller and version verbs
// (`kubeplug-controller controller --leader-elect`, as `kubeplug controller`
// runs). It registers, at this edge, only the hosts provider, whose clusters
// the controller makes (ManagedCluster): pkg/controller reaches providers
// through the registry alone. It links neither the local provider nor a cloud
// SDK; test/archtest checks both.
package main

import (
	"context"
	"os"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	// The providers a ManagedCluster may use by default
	// (controller.DefaultClusterProviders).
	_ "github.com/kubeplug/kubeplug/pkg/provider/hosts"
)

func main() {
	// The controller verb stops on SIGINT and SIGTERM itself, releasing its
	// leases within its grace period.
	os.Exit(cmd.ControllerMain(context.Background(), os.Args[1:], cmd.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}
