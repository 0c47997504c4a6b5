package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// defaultSizes are the object counts BenchmarkApplySizes compares at, unless
// KUBEPLUG_BENCH_SIZES lists others ("250,1000").
var defaultSizes = []int{250, 1000, 4000}

// sample is one iteration's figures at one size.
type sample struct {
	kubeplug, bare, noop, kubectl, helm time.Duration
	// stamped is the bare loop applying the objects as kubeplug sends them:
	// with its plugin label, which the API server stores and manages the
	// field of.
	stamped time.Duration
	// fixed is what a fresh apply sent beyond one apply per object, noopReqs
	// what a re-apply with nothing changed sent: counted by kubeplug's client.
	fixed, noopReqs int
	// serverFixed and serverNoop are the same as the API server counted them
	// (apiserver_request_total), which includes what else the control plane
	// did meanwhile.
	serverFixed, serverNoop int
	// kubeplugCPU, bareCPU and noopCPU are the CPU time this process used for
	// the fresh apply, the bare loop and the re-apply (rusage around each).
	kubeplugCPU, bareCPU, noopCPU time.Duration
	// kubeplugServer, bareServer and stampedServer are the CPU time the control
	// plane's processes (the API server, etcd, the controllers) used meanwhile.
	kubeplugServer, bareServer, stampedServer time.Duration
}

// BenchmarkApplySizes applies the same ConfigMaps from 20 plugins in six
// dependency waves with kubeplug and with a bare parallel server-side-apply
// loop (the limit here), alternating which goes first, at 250, 1,000 and 4,000
// objects; then with kubectl apply --server-side and helm install (one release
// per plugin, when KUBEPLUG_HELM names helm). Every tool applies into its own
// namespace; every kubeplug apply is a fresh install. It prints one table of
// medians: times, kubeplug's ratio to the bare loop, a no-op re-apply, and the
// API requests kubeplug sent beyond one per object.
//
//	KUBEPLUG_HELM=bin/tools/helm go test ./test/bench -run '^$' -bench ApplySizes -benchtime 3x -v
func BenchmarkApplySizes(b *testing.B) {
	sizes := defaultSizes
	if env := os.Getenv("KUBEPLUG_BENCH_SIZES"); env != "" {
		sizes = nil
		for f := range strings.SplitSeq(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < plugins {
				b.Fatalf("KUBEPLUG_BENCH_SIZES: %q is not a count of objects of at least %d", f, plugins)
			}
			sizes = append(sizes, n)
		}
	}
	// One round first, not counted: the control plane this binary started is
	// still warming up (its controllers starting, etcd and the caches filling),
	// which made the first samples' ratios up to twice the rest's.
	b.Log("warm-up round, not counted:")
	applySample(b, sizes[0], 0)
	samples := map[int][]sample{}
	for _, size := range sizes {
		b.Run(fmt.Sprintf("objects=%d", size), func(b *testing.B) {
			var got []sample
			for n := 0; b.Loop(); n++ {
				got = append(got, applySample(b, size, n))
			}
			samples[size] = got
			m := medians(got)
			b.ReportMetric(ratios(got), "x-of-bare-loop")
			b.ReportMetric(stampedRatios(got), "x-of-bare-loop-same-objects")
			b.ReportMetric(float64(m.fixed), "fixed-requests")
			b.ReportMetric(float64(m.noopReqs), "noop-requests")
			b.ReportMetric(m.noop.Seconds(), "reapply-s")
			b.ReportMetric(cpuPerObject(m.kubeplugCPU, size), "kubeplug-cpu-µs/obj")
			b.ReportMetric(cpuPerObject(m.bareCPU, size), "bare-cpu-µs/obj")
			b.ReportMetric(cpuPerObject(m.noopCPU, size), "noop-cpu-µs/obj")
		})
	}
	printTable(os.Stdout, sizes, samples)
	summariseApply(b, sizes, samples)
}

// applySample is iteration n at size objects.
func applySample(b *testing.B, size, n int) sample {
	cp := testcluster.ControlPlane(b)
	kubeconfig := cp.KubeconfigPath()
	cfg := testcluster.RESTConfig(b)
	cfg.QPS, cfg.Burst = 500, 1000
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	suffix := fmt.Sprintf("%d-%d-%d", size, n, time.Now().UnixNano()%100000)
	var s sample

	path := kubeplugCluster(b, filepath.Join(dir, "kubeplug"), "kp-"+suffix, size)
	apply := action.NewApply(&action.Config{NoBuiltin: true})
	requests := &countingTransport{}
	kcfg := rest.CopyConfig(cfg)
	kcfg.WrapTransport = requests.wrap
	apply.Target.RESTConfig = kcfg
	applyOnce := func() (err error) {
		// Labelled, as the bare loop is, so a CPU profile of this benchmark
		// separates the two: go tool pprof -tagfocus tool=kubeplug.
		pprof.Do(context.Background(), pprof.Labels("tool", "kubeplug"), func(ctx context.Context) {
			cl, l := config.Load(path)
			if cl == nil {
				err = l.Err()
				return
			}
			_, l = apply.Run(ctx, cl)
			err = l.Err()
		})
		return err
	}
	kubeplugRuns := func() {
		before := serverRequests(b, cs)
		cpu, server := processCPU(), controlPlaneCPU()
		s.kubeplug = timeIt(b, "kubeplug apply", applyOnce)
		s.kubeplugCPU, s.kubeplugServer = processCPU()-cpu, controlPlaneCPU()-server
		mid := serverRequests(b, cs)
		fresh := requests.take()
		cpu = processCPU()
		s.noop = timeIt(b, "kubeplug re-apply (no change)", applyOnce)
		s.noopCPU = processCPU() - cpu
		after := serverRequests(b, cs)
		s.noopReqs = requests.take()
		// Every object is one apply; the rest is kubeplug's own bookkeeping. The
		// server also counts the metrics read before each of its counts.
		s.fixed = fresh - size
		s.serverFixed, s.serverNoop = mid-before-1-size, after-mid-1
		b.Logf("API requests: fresh apply %d (%d fixed beyond one per object; the server counted %d), no-op re-apply %d (server %d)",
			fresh, s.fixed, s.serverFixed, s.noopReqs, s.serverNoop)
	}
	bareRuns := func() {
		ns := "bare-" + suffix
		createNamespace(b, dc, ns)
		var all []map[string]any
		for i := range plugins {
			all = append(all, content(ns, i, size)...)
		}
		cpu, server := processCPU(), controlPlaneCPU()
		s.bare = timeIt(b, "bare parallel SSA loop", func() (err error) {
			pprof.Do(context.Background(), pprof.Labels("tool", "bare"), func(ctx context.Context) { err = bareLoop(ctx, dc, ns, all) })
			return err
		})
		s.bareCPU, s.bareServer = processCPU()-cpu, controlPlaneCPU()-server
	}
	stampedRuns := func() {
		ns := "stamped-" + suffix
		createNamespace(b, dc, ns)
		var all []map[string]any
		for i := range plugins {
			for _, o := range content(ns, i, size) {
				u := &unstructured.Unstructured{Object: o}
				u.SetLabels(map[string]string{kube.LabelPlugin: fmt.Sprintf("p%02d", i)})
				all = append(all, u.Object)
			}
		}
		server := controlPlaneCPU()
		s.stamped = timeIt(b, "bare loop, kubeplug's objects", func() error { return bareLoop(context.Background(), dc, ns, all) })
		s.stampedServer = controlPlaneCPU() - server
	}
	// Rotate which goes first: the API server warms up (caches, etcd) on
	// whatever runs first.
	order := []func(){kubeplugRuns, bareRuns, stampedRuns}
	for i := range order {
		order[(i+n)%len(order)]()
	}
	b.Logf("CPU per object: kubeplug %.0f µs, bare loop %.0f µs; the control plane's: %.0f µs, %.0f µs, %.0f µs with kubeplug's objects",
		cpuPerObject(s.kubeplugCPU, size), cpuPerObject(s.bareCPU, size),
		cpuPerObject(s.kubeplugServer, size), cpuPerObject(s.bareServer, size), cpuPerObject(s.stampedServer, size))
	b.Logf("kubeplug / bare loop: %.2f; / bare loop with kubeplug's objects: %.2f", s.kubeplug.Seconds()/s.bare.Seconds(), s.kubeplug.Seconds()/s.stamped.Seconds())

	// kubectl apply --server-side of the same objects, in one directory.
	nsKubectl := "kubectl-" + suffix
	createNamespace(b, dc, nsKubectl)
	kdir := filepath.Join(dir, "kubectl")
	for i := range plugins {
		write(b, filepath.Join(kdir, fmt.Sprintf("p%02d.yaml", i)), yamlDocs(b, content(nsKubectl, i, size)))
	}
	s.kubectl = timeIt(b, "kubectl apply --server-side", func() error {
		return run(filepath.Join(cp.BinDir(), "kubectl"), "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", kdir)
	})

	// helm install of the same content as 20 charts, one release after another.
	if helm := os.Getenv("KUBEPLUG_HELM"); helm != "" {
		nsHelm := "helm-" + suffix
		createNamespace(b, dc, nsHelm)
		s.helm = timeIt(b, "helm install x20", func() error {
			for i := range plugins {
				chart := filepath.Join(dir, "helm", fmt.Sprintf("p%02d", i))
				write(b, filepath.Join(chart, "Chart.yaml"), fmt.Sprintf("apiVersion: v2\nname: p%02d\nversion: 1.0.0\n", i))
				write(b, filepath.Join(chart, "templates", "objects.yaml"), yamlDocs(b, content(nsHelm, i, size)))
				if err := run(helm, "--kubeconfig", kubeconfig, "install", fmt.Sprintf("p%02d", i), chart, "--namespace", nsHelm); err != nil {
					return err
				}
			}
			return nil
		})
	} else if n == 0 {
		b.Log("helm comparison skipped: set KUBEPLUG_HELM (make bench builds it)")
	}

	// Not timed: every iteration's apply is a fresh install, not an upgrade
	// moving the previous iteration's plugins (and pruning their objects).
	un := action.NewUninstall(&action.Config{NoBuiltin: true})
	un.Target.RESTConfig = cfg
	names := []string{"ns"}
	for i := range plugins {
		names = append(names, fmt.Sprintf("p%02d", i))
	}
	un.Cascade = true
	if _, l := un.Run(context.Background(), names...); l.HasFatal() {
		b.Fatalf("uninstall the bench's plugins: %v", l)
	}
	return s
}

// bareLoop server-side applies objs into ns, 32 at a time, as kubeplug's pipe
// is wide: the physical limit of applying them here.
func bareLoop(ctx context.Context, dc dynamic.Interface, ns string, objs []map[string]any) error {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	cms := dc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns)
	for _, o := range objs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			u := &unstructured.Unstructured{Object: o}
			if _, err := cms.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "bench"}); err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// serverRequests is how many requests the API server has served, by its own
// apiserver_request_total counters.
func serverRequests(tb testing.TB, cs kubernetes.Interface) int {
	tb.Helper()
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatalf("read the API server's metrics: %v", err)
	}
	total := 0.0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			tb.Fatalf("apiserver_request_total: %q: %v", line, err)
		}
		total += v
	}
	return int(total)
}

// medians returns each figure's median over samples.
func medians(samples []sample) sample {
	dur := func(f func(sample) time.Duration) time.Duration {
		var v []float64
		for _, s := range samples {
			v = append(v, float64(f(s)))
		}
		return time.Duration(median(v))
	}
	num := func(f func(sample) int) int {
		var v []float64
		for _, s := range samples {
			v = append(v, float64(f(s)))
		}
		return int(median(v) + 0.5)
	}
	return sample{
		kubeplug:    dur(func(s sample) time.Duration { return s.kubeplug }),
		bare:        dur(func(s sample) time.Duration { return s.bare }),
		stamped:     dur(func(s sample) time.Duration { return s.stamped }),
		noop:        dur(func(s sample) time.Duration { return s.noop }),
		kubectl:     dur(func(s sample) time.Duration { return s.kubectl }),
		helm:        dur(func(s sample) time.Duration { return s.helm }),
		fixed:       num(func(s sample) int { return s.fixed }),
		noopReqs:    num(func(s sample) int { return s.noopReqs }),
		serverFixed: num(func(s sample) int { return s.serverFixed }),
		serverNoop:  num(func(s sample) int { return s.serverNoop }),
		kubeplugCPU: dur(func(s sample) time.Duration { return s.kubeplugCPU }),
		bareCPU:     dur(func(s sample) time.Duration { return s.bareCPU }),
		noopCPU:     dur(func(s sample) time.Duration { return s.noopCPU }),

		kubeplugServer: dur(func(s sample) time.Duration { return s.kubeplugServer }),
		bareServer:     dur(func(s sample) time.Duration { return s.bareServer }),
		stampedServer:  dur(func(s sample) time.Duration { return s.stampedServer }),
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// ratios returns the median of kubeplug's time over the bare loop's, each
// pair measured side by side in one iteration.
func ratios(samples []sample) float64 {
	var v []float64
	for _, s := range samples {
		v = append(v, s.kubeplug.Seconds()/s.bare.Seconds())
	}
	return median(v)
}

// stampedRatios is ratios against the bare loop applying kubeplug's objects.
func stampedRatios(samples []sample) float64 {
	var v []float64
	for _, s := range samples {
		v = append(v, s.kubeplug.Seconds()/s.stamped.Seconds())
	}
	return median(v)
}

// printTable writes the medians at every size as one Markdown table.
func printTable(w *os.File, sizes []int, samples map[int][]sample) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nkubeplug apply against a bare parallel SSA loop, kubectl and helm (medians of %s):\n\n", runsOf(sizes, samples))
	b.WriteString("| objects | kubeplug fresh | bare loop | ratio | bare loop, kubeplug's objects (ratio) | no-op re-apply | fixed requests (server) | no-op requests (server) | CPU µs/object: kubeplug, bare, no-op | control plane CPU µs/object: kubeplug, bare, kubeplug's objects | kubectl --server-side | helm install x20 |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, size := range sizes {
		got := samples[size]
		if len(got) == 0 {
			continue
		}
		m := medians(got)
		helm := "-"
		if m.helm > 0 {
			helm = fmt.Sprintf("%.2f s (%.1f×)", m.helm.Seconds(), m.helm.Seconds()/m.kubeplug.Seconds())
		}
		fmt.Fprintf(&b, "| %d | %.2f s | %.2f s | %.2f | %.2f s (%.2f) | %.2f s | %d (%d) | %d (%d) | %.0f, %.0f, %.0f | %.0f, %.0f, %.0f | %.2f s (%.1f×) | %s |\n",
			size, m.kubeplug.Seconds(), m.bare.Seconds(), ratios(got), m.stamped.Seconds(), stampedRatios(got), m.noop.Seconds(),
			m.fixed, m.serverFixed, m.noopReqs, m.serverNoop,
			cpuPerObject(m.kubeplugCPU, size), cpuPerObject(m.bareCPU, size), cpuPerObject(m.noopCPU, size),
			cpuPerObject(m.kubeplugServer, size), cpuPerObject(m.bareServer, size), cpuPerObject(m.stampedServer, size),
			m.kubectl.Seconds(), m.kubectl.Seconds()/m.kubeplug.Seconds(), helm)
	}
	b.WriteString("\nratio: kubeplug's time over the bare loop's, same-run pairs, rotating which went first; ")
	b.WriteString("kubeplug's objects: the bare loop applying what kubeplug sends (its plugin label, which the API server stores and tracks the field of); ")
	b.WriteString("requests: what kubeplug's client sent beyond one apply per object (the API server's apiserver_request_total, which counts the rest of the control plane too); ")
	b.WriteString("CPU: what this process used (rusage) per object, kubeplug's fresh apply, the bare loop, kubeplug's no-op; ")
	b.WriteString("control plane CPU: what its processes (API server, etcd, controllers) used meanwhile; ")
	b.WriteString("kubectl and helm: their time, and how many times kubeplug's.\n")
	b.WriteString(targetTable(sizes, samples))
	_, _ = fmt.Fprint(w, b.String())
}

// noopTarget is issue 42's bound on a re-apply with nothing changed.
const noopTarget = 50 * time.Millisecond

// targetTable puts each [perf] target of the apply beside its anchor: a fresh
// apply at most the bare loop's time (ratio ≤ 1.0), a no-op re-apply at most
// noopTarget, with the CPU of kubeplug and of the control plane meanwhile.
func targetTable(sizes []int, samples map[int][]sample) string {
	var b strings.Builder
	b.WriteString("\n[perf] targets beside their anchors (medians; CPU per object, µs):\n\n")
	b.WriteString("| target | kubeplug | anchor | ratio | met | CPU kubeplug, control plane | anchor's CPU: its own, control plane |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	met := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	for _, size := range sizes {
		got := samples[size]
		if len(got) == 0 {
			continue
		}
		m, r := medians(got), ratios(got)
		fmt.Fprintf(&b, "| fresh apply of %d ≤ 1.0× bare loop | %.2f s | bare loop %.2f s | %.2f | %s | %.0f, %.0f | %.0f, %.0f |\n",
			size, m.kubeplug.Seconds(), m.bare.Seconds(), r, met(r <= 1.0),
			cpuPerObject(m.kubeplugCPU, size), cpuPerObject(m.kubeplugServer, size), cpuPerObject(m.bareCPU, size), cpuPerObject(m.bareServer, size))
		fmt.Fprintf(&b, "| no-op re-apply of %d ≤ %.2f s | %.2f s | %d requests | - | %s | %.0f, - | - |\n",
			size, noopTarget.Seconds(), m.noop.Seconds(), m.noopReqs, met(m.noop <= noopTarget), cpuPerObject(m.noopCPU, size))
		fmt.Fprintf(&b, "| fresh apply of %d against kubectl --server-side | %.2f s | kubectl %.2f s | %.2f | - | - | - |\n",
			size, m.kubeplug.Seconds(), m.kubectl.Seconds(), m.kubeplug.Seconds()/m.kubectl.Seconds())
		if m.helm > 0 {
			fmt.Fprintf(&b, "| fresh apply of %d against helm install ×20 | %.2f s | helm %.2f s | %.2f | - | - | - |\n",
				size, m.kubeplug.Seconds(), m.helm.Seconds(), m.kubeplug.Seconds()/m.helm.Seconds())
		}
	}
	b.WriteString("\nanchor: the bare parallel server-side-apply loop (32 at a time, plain objects), kubectl and helm of the same objects; `up` has its own table (BenchmarkUp).\n")
	return b.String()
}

func runsOf(sizes []int, samples map[int][]sample) string {
	var parts []string
	for _, size := range sizes {
		parts = append(parts, fmt.Sprint(len(samples[size])))
	}
	return strings.Join(parts, "/") + " run(s) per size"
}
