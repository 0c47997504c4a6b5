package controller_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kubeplug/kubeplug/pkg/action"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/test/harness/testcluster"
)

// benchChild runs the controller replica without leader election (see runChild).
const benchChild = "KUBEPLUG_CONTROLLER_TEST_BENCH"

// benchProfile names a directory where each benchmarked controller process
// writes its CPU profile (cpu-PID.pprof, the whole run) and, when it stops,
// its heap profiles (heap-PID.pprof: in use; allocs-PID.pprof: allocated).
const benchProfile = "KUBEPLUG_BENCH_PROFILE"

// profile starts the CPU profile into dir; the function it returns stops it
// and writes the heap profiles.
func profile(dir string) func() {
	pid := os.Getpid()
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", pid)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		for _, name := range []string{"heap", "allocs"} {
			if h, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, pid))); err == nil {
				_ = pprof.Lookup(name).WriteTo(h, 0)
				h.Close()
			}
		}
	}
}

// BenchmarkInstallations creates $KUBEPLUG_BENCH_INSTALLATIONS (default 1000)
// installations of 1–3 small plugins each (one ConfigMap per plugin, each
// installation with its own catalog ConfigMap) across 10 namespaces, starts the
// controller as its own process and reports: the time until every one is Ready,
// the controller's CPU and peak RSS; then restarts it and reports the CPU of the
// resync of all of them with nothing changed. Before, for comparison, it times
// one CLI apply of the same plugins from one cluster file, unless
// $KUBEPLUG_BENCH_SKIP_CLI is set (at 5,000 installations that one apply of
// ~10,000 plugins takes longer than the controller's whole run).
//
// With $KUBEPLUG_BENCH_TARGETS=N the installations are spread over N
// TargetClusters instead of the controller's own cluster: N namespaces, each
// with one TargetCluster ("target") whose kubeconfig Secret points at the
// test's API server. Each is a cluster of its own to the controller (its own
// client, its own view of the release records), though all N are one API
// server: each view holds the records of all N, more than N clusters would.
//
//	go test ./pkg/controller -run '^$' -bench Installations -benchtime 1x -timeout 60m
func BenchmarkInstallations(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("KUBEPLUG_BENCH_INSTALLATIONS")); err == nil && v > 0 {
		n = v
	}
	targets, _ := strconv.Atoi(os.Getenv("KUBEPLUG_BENCH_TARGETS"))
	spread := 10 // namespaces
	if targets > 0 {
		spread = targets
	}
	rc := testcluster.RESTConfig(b)
	cs := testcluster.Client(b)
	dc := dynamic.NewForConfigOrDie(rc)
	installCRDs(b, rc)
	pkgDir := b.TempDir()
	var enabled []string
	began := time.Now()
	for i := range n {
		ns := fmt.Sprintf("bench-%d", i%spread)
		target := ""
		if targets > 0 {
			target = "target: target, "
		}
		if i < spread {
			namespace(b, cs, ns)
			if targets > 0 {
				kubeconfig(b, cs, ns, "target", testcluster.ControlPlane(b).KubeconfigPath(), "bench")
			}
		}
		pkgs := map[string][]byte{}
		var plugins []string
		for j := range 1 + i%3 {
			name := fmt.Sprintf("b%d-p%d", i, j)
			archive := pkgArchive(b, map[string]string{
				"plugin.yaml": "apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: " + name + ", version: 1.0.0}\nspec:\n  contributes:\n    kubernetes: {manifests: [m.yaml]}\n",
				"m.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: " + ns + "}\ndata: {value: '{{ .Values.value | default \"x\" }}'}\n",
			})
			pkgs[name+".tgz"] = archive
			plugins = append(plugins, "{name: "+name+"}")
			enabled = append(enabled, name)
			if err := os.WriteFile(filepath.Join(pkgDir, name+".tgz"), archive, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		name := fmt.Sprintf("inst-%d", i)
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(b.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-pkgs"}, BinaryData: pkgs}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		create(b, dc, catGVR, ns, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginCatalog, metadata: {name: `+name+`}, spec: {sources: [{configMap: `+name+`-pkgs}]}}`)
		create(b, dc, instGVR, ns, `{apiVersion: kubeplug.dev/v1alpha1, kind: PluginInstallation, metadata: {name: `+name+`}, spec: {`+target+`catalogs: [`+name+`], interval: 1h, plugins: [`+strings.Join(plugins, ", ")+`]}}`)
	}
	b.Logf("created %d installations of %d plugins (on %d target clusters) in %s", n, len(enabled), max(targets, 1), time.Since(began).Round(time.Millisecond))
	if os.Getenv("KUBEPLUG_BENCH_SKIP_CLI") == "" {
		benchCLI(b, rc, pkgDir, enabled)
	}
	benchController(b, dc, n)
}

// benchCLI times one CLI apply of the plugins enabled from one cluster file,
// then uninstalls them (so that the controller installs them itself).
func benchCLI(b *testing.B, rc *rest.Config, pkgDir string, enabled []string) {
	dir := b.TempDir()
	var refs []string
	var sources []string
	for _, name := range enabled {
		refs = append(refs, "{name: "+name+"}")
		sources = append(sources, "{dir: "+filepath.Join(pkgDir, name+".tgz")+"}")
	}
	file := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: bench}\nspec:\n  kubernetesVersion: 1.37.1\n  plugins:\n    sources: ["+strings.Join(sources, ", ")+"]\n    enabled: ["+strings.Join(refs, ", ")+"]\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	cl, l := config.Load(file)
	if l.HasFatal() {
		b.Fatal(l)
	}
	a := action.NewApply(&action.Config{NoBuiltin: true})
	a.Target.RESTConfig = rc
	a.Timeout = 10 * time.Minute
	start := time.Now()
	if _, l := a.Run(b.Context(), cl); l.HasFatal() {
		b.Fatalf("CLI apply: %v", truncateLines(l.String(), 5))
	}
	cliApply := time.Since(start)
	b.ReportMetric(cliApply.Seconds(), "cli-apply-s")
	b.Logf("CLI: one apply of the same %d plugins from one cluster file: %s", len(enabled), cliApply.Round(time.Millisecond))
	u := action.NewUninstall(&action.Config{NoBuiltin: true})
	u.Target.RESTConfig = rc
	u.All = true
	if _, l := u.Run(b.Context()); l.HasFatal() {
		b.Fatal(l)
	}
}

// benchController starts the controller as its own process and measures the
// convergence of the n installations, then the no-op resync after a restart.
func benchController(b *testing.B, dc dynamic.Interface, n int) {
	ready := func() int {
		list, err := dc.Resource(instGVR).List(b.Context(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		c := 0
		for i := range list.Items {
			if st, _, _ := condition(&list.Items[i], "Ready"); st == "True" {
				c++
			}
		}
		return c
	}
	b.ResetTimer()
	p := startBenchController(b)
	start := time.Now()
	for ready() < n {
		if time.Since(start) > 45*time.Minute {
			b.Fatalf("only %d of %d Ready after %s", ready(), n, time.Since(start))
		}
		time.Sleep(time.Second)
	}
	converge := time.Since(start)
	cpu, rss := p.usage()
	b.ReportMetric(converge.Seconds(), "converge-s")
	b.ReportMetric(cpu.Seconds(), "converge-cpu-s")
	b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MiB")
	b.Logf("%d installations Ready in %s; controller CPU %s, peak RSS %d MiB", n, converge.Round(time.Millisecond), cpu.Round(time.Millisecond), rss>>20)
	p.stop(b)

	// A restart reconciles every installation once, with nothing changed.
	p = startBenchController(b)
	var last time.Duration
	for quiet := 0; quiet < 5; {
		time.Sleep(time.Second)
		c, _ := p.usage()
		if c-last < 20*time.Millisecond && c > 0 {
			quiet++
		} else {
			quiet = 0
		}
		last = c
	}
	cpu, rss = p.usage()
	b.ReportMetric(cpu.Seconds(), "noop-resync-cpu-s")
	b.Logf("no-op resync of %d after a restart: controller CPU %s (with start-up), peak RSS %d MiB", n, cpu.Round(time.Millisecond), rss>>20)
	p.stop(b)
	b.StopTimer()
}

func truncateLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}

type benchProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startBenchController(b *testing.B) *benchProc {
	b.Helper()
	logPath := filepath.Join(b.TempDir(), "controller.log")
	if dir := os.Getenv("KUBEPLUG_BENCH_LOG_DIR"); dir != "" { // keep the controller's log
		logPath = filepath.Join(dir, fmt.Sprintf("controller-%d.log", time.Now().UnixNano()))
	}
	log, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+filepath.Join(b.TempDir(), "work"), benchChild+"=1", "KUBECONFIG="+testcluster.ControlPlane(b).KubeconfigPath())
	if v := os.Getenv("KUBEPLUG_BENCH_CONTROLLER_GOMEMLIMIT"); v != "" {
		cmd.Env = append(cmd.Env, "GOMEMLIMIT="+v) // the controller's only, not the control plane's
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &benchProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); log.Close(); close(p.done) }()
	b.Cleanup(func() { p.stop(b) })
	return p
}

// usage is the process's CPU time (user+system) and peak RSS, from /proc.
func (p *benchProc) usage() (time.Duration, int64) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	cpu := time.Duration(ut+st) * time.Second / 100 // USER_HZ
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	var rss int64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			rss = kb << 10
		}
	}
	return cpu, rss
}

func (p *benchProc) stop(b *testing.B) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
