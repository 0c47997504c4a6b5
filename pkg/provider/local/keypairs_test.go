package local

import (
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/model"
)

// TestKeyPairsOnlyToMachines: the local provider delivers a plugin's key
// pairs in a machine's vendor data, so a key pair for a pool of simulated or
// real nodes, or for the control plane, is refused before anything starts
// rather than dropped.
func TestKeyPairsOnlyToMachines(t *testing.T) {
	m := model.New(model.PoolSpec{Name: "workers", Role: model.RoleWorker, Count: 1}, model.PoolSpec{Name: "gpu", Role: model.RoleWorker, Count: 1})
	p := &Provider{opts: Options{MachinePools: []string{"workers"}}}
	for _, tc := range []struct {
		pools []string
		err   string
	}{
		{pools: nil},
		{pools: []string{"workers"}},
		{pools: []string{"workers", "gpu"}, err: "key pair agent of plugin agent goes to pool gpu, whose nodes are not machines"},
		{pools: []string{model.ControlPlanePool}, err: "key pair agent of plugin agent goes to the control plane"},
	} {
		m.KeyPairs = []model.KeyPair{{Name: "agent", By: "agent", Pools: tc.pools}}
		err := p.checkKeyPairs(m)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("pools %v: got %v, want %q", tc.pools, err, tc.err)
		}
	}
	if got := keyPairsOf(m, "workers"); len(got) != 0 {
		t.Errorf("keyPairsOf(workers) with the pair on the control plane: %v", got)
	}
}
