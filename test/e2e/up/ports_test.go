package up

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/internal/portblock"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
)

// stressCluster is a local cluster of simulated nodes: the control plane and
// kwok, the five processes whose ports can race.
const stressCluster = `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: %s}
spec:
  kubernetesVersion: 1.37.1
  provider: {local: {}}
  nodePools: [{name: workers, count: 2}]
  plugins:
    enabled: [{name: control-plane}]
`

// TestManyClustersAtOnce: several local clusters come up at once through
// `kubeplug up` while a noisy neighbour churns loopback ports — thousands of
// listeners on port 0 and outgoing connections, what a test suite or a busy
// laptop does — and binds random ports by number in the ports blocks come
// from. Every cluster must come up, each on ports of its own block and none in
// the kernel's ephemeral range, and `down --purge` must leave no process.
// KUBEPLUG_STRESS_CLUSTERS sets how many (default 3).
func TestManyClustersAtOnce(t *testing.T) {
	bin, err := controlplane.FindBinDir("")
	if err != nil {
		t.Fatalf("the local control plane is not built (make localcluster): %v", err)
	}
	n := 3
	if v := os.Getenv("KUBEPLUG_STRESS_CLUSTERS"); v != "" {
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("KUBEPLUG_STRESS_CLUSTERS=%q: want a positive number", v)
		}
	}
	work := t.TempDir()
	t.Cleanup(func() { stopClusters(t, work) })

	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	noise, stopNoise := startNoisyNeighbour(t)

	began := time.Now()
	var wg sync.WaitGroup
	outs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			outs[i], errs[i] = kubeplug(ctx, work, bin, i, "up", "--no-kubeconfig-update")
		})
	}
	wg.Wait()
	took := time.Since(began)
	stopNoise()
	t.Logf("%d clusters up at once in %s; the neighbour bound %d ports and made %d connections meanwhile", n, took.Round(time.Millisecond), noise.binds.Load(), noise.dials.Load())

	lo, hi := ephemeral(t)
	first, blocks := portblock.Region()
	blockOf := map[int]int{}
	for i := range n {
		if errs[i] != nil {
			t.Errorf("cluster %d: up: %v\n%s", i, errs[i], outs[i])
			continue
		}
		if !strings.Contains(outs[i], "is ready after") {
			t.Errorf("cluster %d: up did not say the cluster is ready:\n%s", i, outs[i])
		}
		ports := recordedPorts(t, filepath.Join(work, strconv.Itoa(i), "controlplane"))
		base := 0
		for name, p := range ports {
			if p >= lo && p <= hi {
				t.Errorf("cluster %d: %s's port %d lies in the kernel's ephemeral range %d–%d", i, name, p, lo, hi)
			}
			if p < first || p >= first+blocks*portblock.Size {
				t.Errorf("cluster %d: %s's port %d lies outside the port blocks", i, name, p)
			}
			b := first + (p-first)/portblock.Size*portblock.Size
			if base != 0 && b != base {
				t.Errorf("cluster %d: ports of two blocks: %v", i, ports)
			}
			base = b
		}
		if j, ok := blockOf[base]; ok {
			t.Errorf("clusters %d and %d share the block at %d", i, j, base)
		}
		blockOf[base] = i
	}

	for i := range n {
		if out, err := kubeplug(ctx, work, bin, i, "down", "--purge"); err != nil {
			t.Errorf("cluster %d: down --purge: %v\n%s", i, err, out)
		}
		dataDir := filepath.Join(work, strconv.Itoa(i), "controlplane")
		if running, _ := controlplane.Running(dataDir); running {
			t.Errorf("cluster %d: processes left running after down --purge", i)
		}
		if _, err := os.Stat(filepath.Join(work, strconv.Itoa(i))); !os.IsNotExist(err) {
			t.Errorf("cluster %d: state directory left after down --purge (%v)", i, err)
		}
	}
}

// kubeplug runs `kubeplug VERB -f cluster.yaml --state-dir DIR` for cluster i
// under work, with a HOME and kubeconfig of its own.
func kubeplug(ctx context.Context, work, bin string, i int, verb string, args ...string) (string, error) {
	name := "stress-" + strconv.Itoa(i)
	file := filepath.Join(work, name+".yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, stressCluster, name), 0o600); err != nil {
		return "", err
	}
	home := filepath.Join(work, "home-"+strconv.Itoa(i))
	cmd := exec.CommandContext(ctx, "kubeplug", append([]string{verb, "-f", file, "--state-dir", filepath.Join(work, strconv.Itoa(i))}, args...)...)
	cmd.Env = append(os.Environ(), "KUBEPLUG_LOCALCLUSTER_BIN="+bin, "HOME="+home,
		"KUBECONFIG="+filepath.Join(home, ".kube", "config"), "XDG_STATE_HOME="+filepath.Join(home, "state"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func recordedPorts(t *testing.T, dataDir string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, controlplane.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Ports map[string]int `json:"ports"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Ports) != 6 {
		t.Fatalf("%s records %d ports, want 6: %v", dataDir, len(st.Ports), st.Ports)
	}
	return st.Ports
}

func ephemeral(t *testing.T) (lo, hi int) {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral range to check against: %v", err)
	}
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		t.Fatal(err)
	}
	return lo, hi
}

type neighbour struct {
	binds, dials atomic.Int64
}

// startNoisyNeighbour churns loopback ports until stopped: it keeps up to 2,000
// listeners on port 0 open, replacing the oldest with a new one, connects to
// one of them over and over (each connection an ephemeral port), and binds
// random ports of the blocks' region by number for a moment. The returned func
// stops it and closes everything it opened.
func startNoisyNeighbour(t *testing.T) (*neighbour, func()) {
	nb := &neighbour{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	first, blocks := portblock.Region()
	wg.Go(func() {
		var held []net.Listener
		defer func() {
			for _, l := range held {
				_ = l.Close()
			}
		}()
		for {
			select {
			case <-done:
				return
			default:
			}
			if len(held) >= 2000 {
				_ = held[0].Close()
				held = held[1:]
			}
			if l, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
				held = append(held, l)
				nb.binds.Add(1)
				if len(held)%50 == 0 {
					if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
						_ = c.Close()
						nb.dials.Add(1)
					}
				}
			}
			// A port of the blocks' region, named: held for a moment only.
			p := first + rand.IntN(blocks*portblock.Size) //nolint:gosec // noise
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
				nb.binds.Add(1)
				_ = l.Close()
			}
			time.Sleep(200 * time.Microsecond)
		}
	})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return nb, stop
}
