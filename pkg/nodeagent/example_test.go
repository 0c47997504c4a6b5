package nodeagent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
)

// A directory stands for a machine: the manifest and scripts the renderer would write
// go under it, and the agent runs one phase there.
func Example() {
	root, err := os.MkdirTemp("", "node-")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(root) }()
	write := func(p, content string) {
		p = filepath.Join(root, p)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		_ = os.WriteFile(p, []byte(content), 0o644)
	}
	write(hookspec.HooksManifestPath, `{"hooks": [
  {"plugin": "net", "name": "sysctl", "at": "beforeNodeup", "script": "/var/lib/kubeplug/hooks/net/sysctl"},
  {"plugin": "gpu", "name": "driver", "at": "beforeNodeup", "command": ["true"], "when": "node.labels['gpu'] == 'yes'", "behavior": "async-bypass"},
  {"plugin": "mon", "name": "agent", "at": "beforeNodeup", "command": ["true"], "when": "versionAtLeast(cluster.kubernetesVersion, '1.30')"}
]}`)
	write(hookspec.HooksDir+"/net/sysctl", "echo forwarding on\n")

	a, err := nodeagent.New(nodeagent.Options{
		Root:    root,
		Cluster: hookspec.Cluster{Name: "demo", KubernetesVersion: "1.37.2"},
		Node:    hookspec.Node{Name: "worker-0", Pool: "workers", Role: "worker", Labels: map[string]string{"gpu": "no"}},
	})
	if err != nil {
		panic(err)
	}
	rep, err := a.Run(context.Background(), hookspec.PhaseBeforeNodeup)
	if err != nil {
		panic(err)
	}
	for _, h := range rep.Hooks {
		fmt.Printf("%s/%s %s %q\n", h.Plugin, h.Name, h.Status, h.Stdout)
	}
	// Output:
	// net/sysctl succeeded "forwarding on\n"
	// gpu/driver skipped ""
	// mon/agent succeeded ""
}
