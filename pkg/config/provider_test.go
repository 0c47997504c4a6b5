package config_test

import (
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/config"
)

// TestProviderHosts: spec.provider.hosts is one provider (it was refused as
// none); with another beside it, the file is refused at its line.
func TestProviderHosts(t *testing.T) {
	const hosts = `    hosts:
      ssh: {user: kp, agent: true}
      pools:
        - name: control-plane
          hosts: [{address: 192.0.2.10}]
`
	head := "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: h}\nspec:\n  kubernetesVersion: 1.37.1\n  provider:\n"
	c, l := config.Parse("cluster.yaml", []byte(head+hosts))
	if c == nil || l.HasFatal() {
		t.Fatalf("spec.provider.hosts refused:\n%s", l)
	}
	if got := c.Spec.Spec.Provider.Hosts.Pools[0].Hosts[0].Address; got != "192.0.2.10" {
		t.Errorf("address = %q", got)
	}
	_, l = config.Parse("cluster.yaml", []byte(head+"    local: {}\n"+hosts))
	if !l.HasFatal() || !strings.Contains(l.String(), "cluster.yaml:7") || !strings.Contains(l.String(), "expected one provider") {
		t.Errorf("local and hosts together: diagnostics:\n%s", l)
	}
}
