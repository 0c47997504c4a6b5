package realnode

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/provider/local/controlplane"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
)

// nodeBins finds the local control plane's binaries and the real nodes'
// programs, fails (under CI) or skips when this machine cannot run real
// nodes, and points the CLI at both.
func nodeBins(t *testing.T) (bin, nodeBin string) {
	t.Helper()
	bin, err := controlplane.FindBinDir("")
	if err != nil {
		t.Fatalf("the local control plane is not built (make localcluster): %v", err)
	}
	nodeBin = os.Getenv("KUBEPLUG_LOCALNODE_BIN")
	if nodeBin == "" {
		nodeBin = filepath.Join(filepath.Dir(filepath.Dir(bin)), "localnode", "bin")
	}
	bins := realnode.Bins{Kubelet: filepath.Join(bin, "kubelet"), KubeProxy: filepath.Join(bin, "kube-proxy"),
		Containerd: filepath.Join(nodeBin, "containerd"), Runc: "/usr/sbin/runc", CNI: "/usr/lib/cni"}
	if err := realnode.Preflight(bins, filepath.Join(nodeBin, "kubeplug-registry")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run real nodes (make localnode node-deps): %v", err)
		}
		t.Skipf("this machine cannot run real nodes: %v", err)
	}
	t.Setenv("KUBEPLUG_LOCALCLUSTER_BIN", bin)
	t.Setenv("KUBEPLUG_LOCALNODE_BIN", nodeBin)
	return bin, nodeBin
}

// cliFor runs kubeplug commands on the cluster file and state directory
// (up without touching the user's kubeconfig): kpCode returns the exit code
// and output, kp fails the test on a non-zero exit.
func cliFor(t *testing.T, file, state string, timeout time.Duration) (kpCode func(...string) (int, string), kp func(...string) string) {
	kpCode = func(args ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var out bytes.Buffer
		args = append(args, "-f", file, "--state-dir", state)
		if args[0] == "up" {
			args = append(args, "--no-kubeconfig-update")
		}
		code := cmd.Main(ctx, args, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
		return code, out.String()
	}
	kp = func(args ...string) string {
		t.Helper()
		code, out := kpCode(args...)
		if code != 0 {
			t.Fatalf("kubeplug %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	return kpCode, kp
}

// useMachineImage sets for the test the machine image it boots machines from
// ($KUBEPLUG_MACHINE_IMAGE, else the one `make machine-image` wrote beside the
// node binaries in bin), failing it when the image is not built.
func useMachineImage(t *testing.T, bin string) {
	t.Helper()
	machineImage := os.Getenv("KUBEPLUG_MACHINE_IMAGE")
	if machineImage == "" {
		machineImage = filepath.Join(filepath.Dir(filepath.Dir(bin)), "machine")
	}
	if _, err := realnode.LoadImage(machineImage); err != nil {
		t.Fatalf("the machine image is not built (make machine-image): %v", err)
	}
	t.Setenv("KUBEPLUG_MACHINE_IMAGE", machineImage)
}
