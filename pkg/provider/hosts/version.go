package hosts

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/provider/internal/kubebin"
)

var _ provider.VersionChecker = (*Provider)(nil)

// CheckKubernetesVersion implements provider.VersionChecker. The hosts run
// the Kubernetes of the node programs the provider delivers — the one
// kubeplug-localcluster program of Programs.LocalclusterBin, which is the
// kubelet, kube-proxy and the control plane's images — whatever the file
// says. So spec.kubernetesVersion must be their version, patch release
// included (the rendered files name it: image tags, the nodes'
// configuration); any other is refused, before any host is touched, with an
// error wrapping provider.ErrUnsupportedVersion that names both versions and
// the programs' directory. Moving a cluster to another version is giving the
// provider that version's programs (a run with another LocalclusterBin),
// which rolls every host.
//
// Programs that cannot be found are not this check's to report: Up names
// them.
func (p *Provider) CheckKubernetesVersion(v string) error {
	progs, err := p.opts.Programs.withDefaults()
	if err != nil {
		return nil
	}
	have, err := kubebin.Version(filepath.Join(progs.LocalclusterBin, "kube-apiserver"))
	if err != nil {
		return nil
	}
	v = strings.TrimPrefix(v, "v")
	if v == have {
		return nil
	}
	return fmt.Errorf("%w %s: the hosts provider runs the Kubernetes of the node programs it delivers, and those in %s ($%s) are Kubernetes %s: set spec.kubernetesVersion to %s, or run kubeplug with the programs of %s",
		provider.ErrUnsupportedVersion, v, progs.LocalclusterBin, kubebin.BinDirEnv, have, have, v)
}
