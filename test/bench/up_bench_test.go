package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

// upSample is one iteration of BenchmarkUp: kubeplug up of the quickstart
// with every pool simulated, and its anchor, the same control plane and Nodes
// started as kwokctl would start them (no plugin, no render).
type upSample struct {
	up, anchor time.Duration
	// upCPU is what the kubeplug process used (rusage of the finished
	// command); upServer and anchorServer what the control plane's processes
	// (etcd, the API server, the controllers, kwok) used by the time each was
	// ready.
	upCPU, upServer, anchorServer time.Duration
}

// BenchmarkUp brings the quickstart up with every pool simulated (its
// realPools emptied) from a fresh state directory, with the CLI built here,
// and takes it down again; then, as its anchor, starts what kwokctl would:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
// (controlplane.Start with its defaults, which the tests run on) and as many
// Nodes as the quickstart has, until every Node is Ready. The two alternate
// which goes first. It prints the medians, the ratio of each pair, and the
// CPU of kubeplug and of the control plane:
//
//	go test ./test/bench -run '^$' -bench BenchmarkUp -benchtime 3x -v
func BenchmarkUp(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "kubeplug")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/kubeplug").CombinedOutput(); err != nil {
		b.Fatalf("build kubeplug: %v\n%s", err, out)
	}
	cluster := simulatedQuickstart(b, filepath.Join(dir, "quickstart"))
	var got []upSample
	for n := 0; b.Loop(); n++ {
		var s upSample
		runs := []func(){
			func() {
				s.up, s.upCPU, s.upServer = upOnce(b, bin, cluster, filepath.Join(dir, fmt.Sprintf("state-%d", n)))
			},
			func() {
				s.anchor, s.anchorServer = anchorOnce(b, filepath.Join(dir, fmt.Sprintf("anchor-%d", n)), quickstartNodes)
			},
		}
		for i := range runs {
			runs[(i+n)%len(runs)]()
		}
		b.Logf("up %.2f s (kubeplug CPU %.2f s, control plane %.2f s); kwok-only start %.2f s (control plane %.2f s); ratio %.2f",
			s.up.Seconds(), s.upCPU.Seconds(), s.upServer.Seconds(), s.anchor.Seconds(), s.anchorServer.Seconds(), s.up.Seconds()/s.anchor.Seconds())
		got = append(got, s)
	}
	med := func(f func(upSample) float64) float64 {
		var v []float64
		for _, s := range got {
			v = append(v, f(s))
		}
		return median(v)
	}
	ratio := med(func(s upSample) float64 { return s.up.Seconds() / s.anchor.Seconds() })
	b.ReportMetric(med(func(s upSample) float64 { return s.up.Seconds() }), "up-s")
	b.ReportMetric(ratio, "x-of-kwok-only")
	fmt.Printf("\n`up` of the quickstart, every pool simulated, against a kwok-only start (medians of %d run(s)):\n\n", len(got))
	fmt.Println("| target | kubeplug up | kwok-only start | ratio | CPU s: kubeplug, control plane (up) | control plane CPU s (kwok-only) |")
	fmt.Println("|---|---|---|---|---|---|")
	fmt.Printf("| up ≤ 3 s | %.2f s | %.2f s | %.2f | %.2f, %.2f | %.2f |\n",
		med(func(s upSample) float64 { return s.up.Seconds() }), med(func(s upSample) float64 { return s.anchor.Seconds() }), ratio,
		med(func(s upSample) float64 { return s.upCPU.Seconds() }), med(func(s upSample) float64 { return s.upServer.Seconds() }),
		med(func(s upSample) float64 { return s.anchorServer.Seconds() }))
	upMed := med(func(s upSample) float64 { return s.up.Seconds() })
	summarise(b, summaryRow{
		target:   fmt.Sprintf("up of the quickstart, every pool simulated ≤ %.0f s", upTarget.Seconds()),
		kubeplug: fmt.Sprintf("%.2f s", upMed), anchor: fmt.Sprintf("kwok-only start %.2f s", med(func(s upSample) float64 { return s.anchor.Seconds() })),
		ratio: fmt.Sprintf("%.2f", ratio), met: yesNo(upMed <= upTarget.Seconds()),
		cpu: fmt.Sprintf("%.2f, %.2f (-, %.2f)", med(func(s upSample) float64 { return s.upCPU.Seconds() }),
			med(func(s upSample) float64 { return s.upServer.Seconds() }), med(func(s upSample) float64 { return s.anchorServer.Seconds() })),
	})
	fmt.Println("\nkwok-only start: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with the tests' flags, and the quickstart's Nodes Ready, without plugins, render or hooks (what kwokctl create cluster does); ratio: same-run pairs, rotating which went first; CPU: the kubeplug process's own (rusage), and what the control plane's processes had used when each was ready.")
}

// upTarget is issue 42's bound on up of the simulated quickstart (warm).
const upTarget = 3 * time.Second

// quickstartNodes is how many Nodes the quickstart has: its control-plane
// node and its pools' (apps 1, workers 2, edge 1).
const quickstartNodes = 5

// simulatedQuickstart copies examples/quickstart into dir with every pool
// simulated and returns its cluster file.
func simulatedQuickstart(b *testing.B, dir string) string {
	if out, err := exec.Command("cp", "-r", "../../examples/quickstart", dir).CombinedOutput(); err != nil {
		b.Fatalf("copy the quickstart: %v\n%s", err, out)
	}
	path := filepath.Join(dir, "cluster.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Replace(string(raw), "realPools: [apps]", "realPools: []", 1)
	if text == string(raw) {
		b.Fatal("examples/quickstart/cluster.yaml no longer names realPools: [apps]; update BenchmarkUp")
	}
	write(b, path, text)
	return path
}

// upOnce runs kubeplug up of cluster with state directory state, then down
// --purge (not timed), and returns up's time, its CPU, and the control plane's
// CPU when up returned.
func upOnce(b *testing.B, bin, cluster, state string) (time.Duration, time.Duration, time.Duration) {
	r := upReal(b, bin, cluster, state)
	downReal(b, bin, cluster, state, true)
	return r.took, r.cpu, r.cluster
}

// anchorOnce starts the kwok-only control plane in dataDir with nodes Nodes
// and returns the time until every Node was Ready and its processes' CPU.
func anchorOnce(b *testing.B, dataDir string, nodes int) (time.Duration, time.Duration) {
	ctx := context.Background()
	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{DataDir: dataDir})
	if err != nil {
		b.Fatalf("kwok-only start: %v", err)
	}
	defer func() {
		if err := cp.Stop(ctx); err != nil {
			b.Errorf("stop the kwok-only control plane: %v", err)
		}
	}()
	if _, err := cp.AddNodes(ctx, nodes, controlplane.NodeOptions{}); err != nil {
		b.Fatalf("kwok-only start: %v", err)
	}
	return time.Since(start), cpuOf(dataDir)
}

// cpuOf is the CPU time, user and system, of the running processes whose
// command line names dir: a control plane's components started there.
func cpuOf(dir string) time.Duration {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(st, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(st[i+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * time.Second / clockTicks
}
