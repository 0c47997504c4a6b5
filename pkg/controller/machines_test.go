package controller_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/controller"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

func parseCluster(t *testing.T, text string) *config.Cluster {
	t.Helper()
	cl, l := config.Parse("cluster.yaml", []byte(text))
	if cl == nil {
		t.Fatal(l)
	}
	return cl
}

func nodeEvent(node, msg string, done bool) provider.Event {
	return provider.Event{Step: "node", Node: node, Item: node, Message: msg, Done: done}
}

// machinesLine is "name pool role address phase [step] [message]" per
// machine, one per line.
func machinesLine(ms []v1alpha1.MachineStatus) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%s %s %s %s %s [%s] [%s]\n", m.Name, m.Pool, m.Role, m.Address, m.Phase, m.Step, m.Message)
	}
	return b.String()
}

// TestManagedClusterMachinePhases reads the hosts provider's progress events
// (the words of pkg/provider/hosts, which the CLI's live display shows) into
// machines' phases: the file's hosts listed Pending with pool, role and
// address; connect/deliver → Provisioning, joining → Joining, Ready; a host
// that fails is Failed at the step it was at, with the error; a run that
// stops leaves its hosts in progress Failed; a second up keeps the phases it
// starts from; a host removed from the file is Deleting, then gone; a down is
// Deleting, then gone.
func TestManagedClusterMachinePhases(t *testing.T) {
	cl := parseCluster(t, hostsClusterFile("edge", ""))
	tr := controller.NewMachineTracker(cl, nil, false)
	if got, want := machinesLine(tr.List()), `control-plane-0 control-plane control-plane 10.0.0.1 Pending [] []
workers-0 workers worker 10.0.0.2 Pending [] []
workers-1 workers worker 10.0.0.3 Pending [] []
`; got != want {
		t.Fatalf("before up:\n%s\nwant\n%s", got, want)
	}
	for _, e := range []provider.Event{
		nodeEvent("control-plane-0", "connecting to 10.0.0.1:22", false),
		nodeEvent("workers-0", "connecting to 10.0.0.2:22", false),
		nodeEvent("workers-1", "connecting to 10.0.0.3:22", false),
		nodeEvent("workers-1", "preflight", false),
		nodeEvent("workers-1", "uploading /usr/local/bin/kubelet", false),
		{Step: "node", Node: "workers-1", Message: "pushing images", Total: 100, Complete: 50}, // a byte count: no step
		nodeEvent("workers-1", "failed: host workers-1 (10.0.0.3:22): upload /usr/local/bin/kubelet: disk full", true),
		nodeEvent("control-plane-0", "starting the kubelet and the control plane's static Pods", false),
		nodeEvent("workers-0", "joining", false),
		{Step: "hooks", Message: "a cluster event"},
	} {
		tr.Event(e)
	}
	if got, want := machinesLine(tr.List()), `control-plane-0 control-plane control-plane 10.0.0.1 Joining [starting the kubelet and the control plane's static Pods] []
workers-0 workers worker 10.0.0.2 Joining [joining] []
workers-1 workers worker 10.0.0.3 Failed [uploading /usr/local/bin/kubelet] [host workers-1 (10.0.0.3:22): upload /usr/local/bin/kubelet: disk full]
`; got != want {
		t.Fatalf("during up:\n%s\nwant\n%s", got, want)
	}
	tr.Event(nodeEvent("control-plane-0", "Ready", true))
	// up connects to a Ready host again (its afterDeploy hooks): it stays Ready.
	tr.Event(nodeEvent("control-plane-0", "connecting to 10.0.0.1:22", false))
	tr.Stopped(errors.New("1 host(s) failed: 10.0.0.3\n  host workers-1 (10.0.0.3:22): upload /usr/local/bin/kubelet: disk full"))
	if got, want := machinesLine(tr.List()), `control-plane-0 control-plane control-plane 10.0.0.1 Ready [Ready] []
workers-0 workers worker 10.0.0.2 Failed [joining] [the run stopped: 1 host(s) failed: 10.0.0.3]
workers-1 workers worker 10.0.0.3 Failed [uploading /usr/local/bin/kubelet] [host workers-1 (10.0.0.3:22): upload /usr/local/bin/kubelet: disk full]
`; got != want {
		t.Fatalf("after a failed up:\n%s\nwant\n%s", got, want)
	}

	// The next up starts from these phases; workers-1 is taken out of the
	// file (its pool's count lowered) and cleaned by this run.
	smaller := parseCluster(t, strings.Replace(strings.Replace(hostsClusterFile("edge", ""), ", {address: 10.0.0.3}", "", 1), "count: 2", "count: 1", 1))
	tr = controller.NewMachineTracker(smaller, tr.List(), false)
	if got := machinesLine(tr.List()); !strings.Contains(got, "workers-0 workers worker 10.0.0.2 Failed [joining]") || !strings.Contains(got, "workers-1 workers worker 10.0.0.3 Failed") {
		t.Fatalf("a second up starts from:\n%s", got)
	}
	for _, e := range []provider.Event{
		nodeEvent("workers-0", "joining", false),
		nodeEvent("workers-0", "Ready", true),
		nodeEvent("control-plane-0", "Ready", true),
		nodeEvent("workers-1", "removed from cluster.yaml: drain, delete its Node, clean the host", false),
	} {
		tr.Event(e)
	}
	if got := machinesLine(tr.List()); !strings.Contains(got, "workers-1 workers worker 10.0.0.3 Deleting [removed from cluster.yaml") || !strings.Contains(got, "workers-0 workers worker 10.0.0.2 Ready [Ready] []") {
		t.Fatalf("a removed host:\n%s", got)
	}
	tr.Event(nodeEvent("workers-1", "removed, clean", true))
	tr.Finished(smaller)
	if got, want := machinesLine(tr.List()), `control-plane-0 control-plane control-plane 10.0.0.1 Ready [Ready] []
workers-0 workers worker 10.0.0.2 Ready [Ready] []
`; got != want {
		t.Fatalf("after the second up:\n%s\nwant\n%s", got, want)
	}

	// A roll goes through Provisioning and Joining back to Ready.
	tr = controller.NewMachineTracker(smaller, tr.List(), false)
	tr.Event(nodeEvent("workers-0", "rolling: 2 file(s) changed (/usr/local/bin/kubeplug-localcluster, …)", false))
	if got := machinesLine(tr.List()); !strings.Contains(got, "workers-0 workers worker 10.0.0.2 Provisioning [rolling: 2 file(s)") {
		t.Fatalf("a roll:\n%s", got)
	}
	tr.Event(nodeEvent("workers-0", "restarting the pool's units and the kubelet", false))
	if got := machinesLine(tr.List()); !strings.Contains(got, "workers-0 workers worker 10.0.0.2 Joining") {
		t.Fatalf("a roll restarting:\n%s", got)
	}
	tr.Event(nodeEvent("workers-0", "rolled, Ready", true))

	// Down: every step Deleting, a cleaned host gone, a failed one Failed.
	tr = controller.NewMachineTracker(smaller, tr.List(), true)
	for _, e := range []provider.Event{
		nodeEvent("control-plane-0", "connecting to 10.0.0.1:22", false),
		nodeEvent("workers-0", "removing kubeplug's files and units", false),
		nodeEvent("workers-0", "clean", true),
	} {
		tr.Event(e)
	}
	if got, want := machinesLine(tr.List()), "control-plane-0 control-plane control-plane 10.0.0.1 Deleting [connecting to 10.0.0.1:22] []\n"; got != want {
		t.Fatalf("during down:\n%s\nwant\n%s", got, want)
	}
	tr.Event(nodeEvent("control-plane-0", "failed: host control-plane-0 (10.0.0.1:22): dial tcp: connection refused", true))
	if got := machinesLine(tr.List()); !strings.Contains(got, "control-plane-0 control-plane control-plane 10.0.0.1 Failed [connecting to 10.0.0.1:22] [host control-plane-0 (10.0.0.1:22): dial tcp: connection refused]") {
		t.Fatalf("a failed down:\n%s", got)
	}
}
