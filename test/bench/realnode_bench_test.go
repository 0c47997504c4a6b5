package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// realQuickstartTarget is issue 42's bound on `up` of the quickstart with its
// real node, the node's images already in its store (a second `make up`).
const realQuickstartTarget = 15 * time.Second

// realUp is one `kubeplug up` of the quickstart (upReal).
type realUp struct {
	took, cpu, cluster time.Duration
	// ready is when each plugin's objects were ready, from up's progress
	// lines ("metrics-server: ready 8/8 [17.7s]").
	ready map[string]time.Duration
}

// realSample is one iteration of BenchmarkUpRealNode.
type realSample struct {
	first, again realUp
	// simulated is the anchor: the same quickstart with every pool simulated.
	simulated, simulatedCPU, simulatedCluster time.Duration
}

// BenchmarkUpRealNode brings the quickstart up as `make up` does, its apps pool
// a real node (a kubelet, containerd and kube-proxy on this machine), from a
// fresh state directory; takes it down keeping its state and brings it up
// again, the images already in the node's store, as a second `make up` does;
// then takes it down with --purge. Its anchor is the same quickstart with every
// pool simulated, in the same iteration: what the real node and its Pods add.
// It prints when each plugin was ready (metrics-server is ready only after two
// scrapes a resolution apart, 10 s in the quickstart: the floor under the
// target) and the CPU of kubeplug and of the cluster's processes. It needs
// root and the real node's programs and images (make localnode images); it is
// skipped, saying why, without them:
//
//	go test ./test/bench -run '^$' -bench BenchmarkUpRealNode -benchtime 1x -v
func BenchmarkUpRealNode(b *testing.B) {
	if why := realNodeMissing(); why != "" {
		summarise(b, summaryRow{target: fmt.Sprintf("real-node quickstart up ≤ %.0f s", realQuickstartTarget.Seconds()), met: "not measured: " + why})
		b.Skip(why)
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "kubeplug")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/kubeplug").CombinedOutput(); err != nil {
		b.Fatalf("build kubeplug: %v\n%s", err, out)
	}
	real := filepath.Join(dir, "real")
	if out, err := exec.Command("cp", "-r", "../../examples/quickstart", real).CombinedOutput(); err != nil {
		b.Fatalf("copy the quickstart: %v\n%s", err, out)
	}
	cluster := filepath.Join(real, "cluster.yaml")
	simulated := simulatedQuickstart(b, filepath.Join(dir, "simulated"))
	var got []realSample
	for n := 0; b.Loop(); n++ {
		var s realSample
		state := filepath.Join(dir, fmt.Sprintf("state-%d", n))
		s.first = upReal(b, bin, cluster, state)
		downReal(b, bin, cluster, state, false)
		s.again = upReal(b, bin, cluster, state)
		downReal(b, bin, cluster, state, true)
		s.simulated, s.simulatedCPU, s.simulatedCluster = upOnce(b, bin, simulated, filepath.Join(dir, fmt.Sprintf("simulated-%d", n)))
		b.Logf("real-node up: fresh state %.1f s, again %.1f s (ready: %s); simulated %.1f s",
			s.first.took.Seconds(), s.again.took.Seconds(), readyList(s.again.ready), s.simulated.Seconds())
		got = append(got, s)
	}
	med := func(f func(realSample) time.Duration) time.Duration {
		var v []float64
		for _, s := range got {
			v = append(v, float64(f(s)))
		}
		return time.Duration(median(v))
	}
	again := med(func(s realSample) time.Duration { return s.again.took })
	first := med(func(s realSample) time.Duration { return s.first.took })
	sim := med(func(s realSample) time.Duration { return s.simulated })
	ready := map[string]time.Duration{}
	for plugin := range got[0].again.ready {
		ready[plugin] = med(func(s realSample) time.Duration { return s.again.ready[plugin] })
	}
	cpu := func(u, c time.Duration) string { return fmt.Sprintf("%.2f, %.2f", u.Seconds(), c.Seconds()) }
	againCPU := cpu(med(func(s realSample) time.Duration { return s.again.cpu }), med(func(s realSample) time.Duration { return s.again.cluster }))
	firstCPU := cpu(med(func(s realSample) time.Duration { return s.first.cpu }), med(func(s realSample) time.Duration { return s.first.cluster }))
	simCPU := cpu(med(func(s realSample) time.Duration { return s.simulatedCPU }), med(func(s realSample) time.Duration { return s.simulatedCluster }))
	b.ReportMetric(again.Seconds(), "up-again-s")
	b.ReportMetric(first.Seconds(), "up-fresh-s")

	fmt.Printf("\n`up` of the quickstart with its real node (medians of %d run(s)):\n\n", len(got))
	fmt.Println("| target | kubeplug up | anchor: every pool simulated | ratio | met | plugins ready at | CPU s: kubeplug, the cluster's processes (anchor's) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	fmt.Printf("| real-node quickstart ≤ %.0f s, images in the node's store | %.2f s | %.2f s | %.2f | %s | %s | %s (%s) |\n",
		realQuickstartTarget.Seconds(), again.Seconds(), sim.Seconds(), again.Seconds()/sim.Seconds(), yesNo(again <= realQuickstartTarget), readyList(ready), againCPU, simCPU)
	fmt.Printf("| (fresh state: images pushed into a new store) | %.2f s | %.2f s | %.2f | - | - | %s |\n",
		first.Seconds(), sim.Seconds(), first.Seconds()/sim.Seconds(), firstCPU)
	fmt.Println("\nplugins ready at: from up's progress lines, the second up. metrics-server is ready after two scrapes a resolution apart (the quickstart's 10s, the least metrics-server accepts), so it is ready no sooner than 10 s after its container starts.")
	summarise(b,
		summaryRow{
			target:   fmt.Sprintf("real-node quickstart up ≤ %.0f s (images in the node's store)", realQuickstartTarget.Seconds()),
			kubeplug: fmt.Sprintf("%.2f s", again.Seconds()), anchor: fmt.Sprintf("every pool simulated %.2f s", sim.Seconds()),
			ratio: fmt.Sprintf("%.2f", again.Seconds()/sim.Seconds()), met: yesNo(again <= realQuickstartTarget), cpu: againCPU + " (" + simCPU + ")",
		},
		summaryRow{
			target:   "real-node quickstart up, fresh state",
			kubeplug: fmt.Sprintf("%.2f s", first.Seconds()), anchor: fmt.Sprintf("every pool simulated %.2f s", sim.Seconds()),
			ratio: fmt.Sprintf("%.2f", first.Seconds()/sim.Seconds()), cpu: firstCPU,
		})
}

// realNodeMissing says why a real node cannot be started here, or "".
func realNodeMissing() string {
	if os.Geteuid() != 0 {
		return "a real node needs root"
	}
	for env, dflt := range map[string]string{"KUBEPLUG_LOCALNODE_BIN": "../../_output/localnode/bin", "KUBEPLUG_IMAGES_BIN": "../../_output/images/bin"} {
		dir := os.Getenv(env)
		if dir == "" {
			abs, err := filepath.Abs(dflt)
			if err != nil {
				return err.Error()
			}
			dir = abs
			if err := os.Setenv(env, dir); err != nil {
				return err.Error()
			}
		}
		if _, err := os.Stat(filepath.Join(dir, ".built")); err != nil {
			return fmt.Sprintf("no real-node programs or images in %s (%s; make localnode images)", dir, env)
		}
	}
	return ""
}

// progressReady is an up progress line saying a plugin's objects are ready.
var progressReady = regexp.MustCompile(`(?m)^\s+([a-z0-9][a-z0-9-]*): ready \d+/\d+ \[([0-9.a-zµ]+)\]`)

// upReal runs kubeplug up of cluster in state and returns its time, CPU (its
// own and the cluster's processes') and when each plugin was ready. A failed
// up is taken down with --purge and fails the benchmark.
func upReal(b *testing.B, bin, cluster, state string) realUp {
	cmd := exec.Command(bin, "up", "-f", cluster, "--state-dir", state, "--no-kubeconfig-update")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	r := realUp{took: time.Since(start), ready: map[string]time.Duration{}}
	if err != nil {
		downReal(b, bin, cluster, state, true)
		b.Fatalf("kubeplug up: %v\n%s", err, out.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	r.cluster = cpuOf(state)
	for _, m := range progressReady.FindAllStringSubmatch(out.String(), -1) {
		if d, err := time.ParseDuration(m[2]); err == nil {
			r.ready[m[1]] = d
		}
	}
	return r
}

// downReal takes the cluster down, with --purge or keeping its state.
func downReal(b *testing.B, bin, cluster, state string, purge bool) {
	args := []string{"down", "-f", cluster, "--state-dir", state}
	if purge {
		args = append(args, "--purge")
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		b.Errorf("kubeplug %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// readyList prints plugins' ready times in the order they were ready.
func readyList(ready map[string]time.Duration) string {
	names := make([]string, 0, len(ready))
	for n := range ready {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return ready[names[i]] < ready[names[j]] })
	var parts []string
	for _, n := range names {
		if ready[n] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f s", n, ready[n].Seconds()))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
