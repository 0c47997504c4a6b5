package local

import (
	"fmt"
	"slices"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
	"github.com/kubeplug/kubeplug/pkg/serving"
)

// A plugin's key pairs (contributes.keyPairs) reach a machine as the
// cluster's CA does: in its vendor data, which lives only in the machine's
// seed in the state directory, never in its user data or in rendered output.
// Nodes that are no machine (simulated or real nodes) and the control plane
// have no such channel yet: a key pair for their pools is refused before
// anything starts.

// keyPairsOf returns the key pairs of m that pool's machines get.
func keyPairsOf(m *model.Model, pool string) []model.KeyPair {
	var out []model.KeyPair
	for _, kp := range m.KeyPairs {
		if slices.Contains(kp.Pools, pool) {
			out = append(out, kp)
		}
	}
	return out
}

// checkKeyPairs refuses key pairs for pools whose nodes are not machines.
func (p *Provider) checkKeyPairs(m *model.Model) error {
	pools := provider.KeyPairPools(m)
	for _, pool := range m.PoolNames() {
		what, ok := pools[pool]
		if !ok || m.Pools[pool].Count == 0 {
			continue
		}
		if pool == model.ControlPlanePool {
			return fmt.Errorf("%s goes to the control plane: the local provider delivers plugins' key pairs only to the machines of worker pools (spec.provider.local.machinePools); limit it with roles: [worker] or pools", what)
		}
		if !p.machinePool(pool) {
			return fmt.Errorf("%s goes to pool %s, whose nodes are not machines: the local provider delivers plugins' key pairs only to the machines of spec.provider.local.machinePools; add %s there, or limit the key pair with pools", what, pool, pool)
		}
	}
	return nil
}

// keyPairFiles issues (or keeps) the key pairs of node n's machine, those of
// the cluster signed by the CA in pkiDir, and returns them as vendor files.
func (p *Provider) keyPairFiles(pkiDir string, n *desiredNode) ([]vendorFile, error) {
	kps := n.keyPairs
	if len(kps) == 0 {
		return nil, nil
	}
	cert, err := bounded.ReadFile(clusterpki.CACertPath(pkiDir), 1<<20)
	if err != nil {
		return nil, fmt.Errorf("key pairs: %w", err)
	}
	key, err := bounded.ReadFile(clusterpki.CAKeyPath(pkiDir), 1<<20)
	if err != nil {
		return nil, fmt.Errorf("key pairs: %w", err)
	}
	files, err := provider.IssueKeyPairs(p.opts.StateDir, serving.KeyPairCA{CertPEM: cert, KeyPEM: key}, kps, serving.DefaultPolicy())
	if err != nil {
		return nil, err
	}
	var out []vendorFile
	for _, f := range files[n.pool] {
		out = append(out, vendorFile{f.Path, f.Mode, string(f.Content)})
	}
	return out, nil
}
