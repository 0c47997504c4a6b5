package controlplane

import (
	"net"
	"path/filepath"

	"github.com/kubeplug/kubeplug/pkg/provider/internal/clusterpki"
)

// pki is the directory the components' certificates and keys are in, laid
// out as clusterpki makes it (DataDir/pki unless Options.PKIDir names one).
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// ensurePKI makes dir a complete PKI directory for an API server that serves
// serviceIP, keeping what it already holds (clusterpki.EnsurePKI).
func ensurePKI(dir string, serviceIP net.IP) (pki, error) {
	return pki{dir: dir}, clusterpki.EnsurePKI(dir, serviceIP)
}
