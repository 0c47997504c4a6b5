package realnode

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/pkg/provider/local/realnode"
)

// A plugin whose release record the restore must bring back.
const restorePlugin = `apiVersion: kubeplug.dev/v1alpha1
kind: Plugin
metadata: {name: notes, version: 0.1.0, description: a ConfigMap}
spec:
  contributes:
    kubernetes:
      manifests: [manifests/]
`

const restorePluginManifests = `apiVersion: v1
kind: ConfigMap
metadata: {name: notes, namespace: default}
data: {by: plugin}
`

const restoreCluster = `apiVersion: kubeplug.dev/v1alpha1
kind: Cluster
metadata: {name: restore}
spec:
  kubernetesVersion: 1.37.1
  provider:
    local:
      machinePools: [control-plane, m]
  nodePools:
    - {name: m, role: worker, count: 1}
  plugins:
    sources: [{dir: ./plugins}]
    enabled:
      - name: control-plane
        values: {clusterCIDR: 10.247.0.0/16}
      - name: notes
`

// TestControlPlaneMachineRestore: a cluster whose control plane is a machine
// is snapshotted (kubeplug etcd snapshot), deleted (down --purge) and brought
// back on new machines (up --restore-from): the ConfigMaps written before the
// snapshot are back, the one written after it is not, the plugin's release
// record is back (status and history as before), and both Nodes are Ready. It
// logs the time to Ready, the snapshot's and the restore's times.
func TestControlPlaneMachineRestore(t *testing.T) {
	bin, _ := nodeBins(t)
	useMachineImage(t, bin)

	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	file := filepath.Join(dir, "cluster.yaml")
	snap := filepath.Join(dir, "restore.snapshot")
	write(t, filepath.Join(dir, "plugins", "notes", "plugin.yaml"), restorePlugin)
	write(t, filepath.Join(dir, "plugins", "notes", "manifests", "notes.yaml"), restorePluginManifests)
	write(t, file, restoreCluster)
	kpCode, kp := cliFor(t, file, state, 10*time.Minute)
	id := realnode.ClusterID(state)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var out bytes.Buffer
		if code := cmd.Main(ctx, []string{"down", "-f", file, "--state-dir", state, "--purge"}, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out}); code != 0 {
			t.Errorf("down exited %d:\n%s", code, out.String())
		}
		checkNothingLeft(t, state, id)
	})
	kubeconfig := filepath.Join(state, "controlplane", "kubeconfig")
	history := func() string {
		t.Helper()
		var out bytes.Buffer
		if code := cmd.Main(context.Background(), []string{"history", "notes", "--kubeconfig", kubeconfig}, cmd.Streams{In: strings.NewReader(""), Out: &out, Err: &out}); code != 0 {
			t.Fatalf("history exited %d:\n%s", code, out.String())
		}
		return out.String()
	}

	began := time.Now()
	kp("up")
	t.Logf("time to Ready (1 control-plane machine + 1 worker): %s", time.Since(began).Round(time.Second))
	client := clientFor(t, kubeconfig)
	ctx := context.Background()
	for i := range 3 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("keep-%d", i), Namespace: "default"}, Data: map[string]string{"i": fmt.Sprint(i)}}
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	historyBefore := history()

	began = time.Now()
	out := kp("etcd", "snapshot", "--to", snap)
	t.Logf("snapshot: %s (kubeplug etcd snapshot -f cluster.yaml --to %s): %s", time.Since(began).Round(time.Millisecond), snap, strings.TrimSpace(out))
	after := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-snapshot", Namespace: "default"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, after, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Onto the running cluster: refused, nothing changed.
	if code, out := kpCode("up", "--restore-from", snap); code == 0 || !strings.Contains(out, "cluster restore is running in") {
		t.Errorf("a restore onto the running cluster: exit %d:\n%s", code, out)
	}
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "after-snapshot", metav1.GetOptions{}); err != nil {
		t.Errorf("the refused restore changed the cluster: %v", err)
	}

	kp("down", "--purge")
	checkNothingLeft(t, state, id)
	began = time.Now()
	out = kp("up", "--restore-from", snap)
	t.Logf("restore to Ready: %s (kubeplug up -f cluster.yaml --restore-from %s)", time.Since(began).Round(time.Second), snap)
	if !strings.Contains(out, "restored etcd from") {
		t.Errorf("up did not say it restored etcd:\n%s", out)
	}
	client = clientFor(t, kubeconfig)
	for i := range 3 {
		cm, err := client.CoreV1().ConfigMaps("default").Get(ctx, fmt.Sprintf("keep-%d", i), metav1.GetOptions{})
		if err != nil || cm.Data["i"] != fmt.Sprint(i) {
			t.Errorf("ConfigMap keep-%d after the restore: %v %v", i, cm, err)
		}
	}
	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "after-snapshot", metav1.GetOptions{}); err == nil {
		t.Error("the ConfigMap written after the snapshot is there after the restore")
	}
	if got := history(); got != historyBefore {
		t.Errorf("history after the restore:\n%s\nbefore:\n%s", got, historyBefore)
	}
	if out := kp("status"); !strings.Contains(out, "notes") || !strings.Contains(out, "Ready") {
		t.Errorf("status after the restore:\n%s", out)
	}
	for _, node := range []string{"control-plane-0", "m-0"} {
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil || !ready(n) {
			t.Errorf("node %s after the restore: %v", node, err)
		}
	}
}
