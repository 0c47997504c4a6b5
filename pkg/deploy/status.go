package deploy

import (
	"context"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/deploy/ssa"
)

// PluginStatus is an installed plugin as the cluster has it now.
type PluginStatus struct {
	Plugin  string `json:"plugin"`
	Version string `json:"version"`
	// Revision is the plugin's newest recorded revision.
	Revision int `json:"revision"`
	// Owner manages the plugin: "cli" when the CLI installed it, else the
	// PluginInstallation ("namespace/name") of kubeplug's controller.
	Owner   string `json:"owner"`
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
	Objects int    `json:"objects"`
	Ready   int    `json:"ready"`
	Missing int    `json:"missing"`
	// MissingObjects names the objects Missing counts, sorted.
	MissingObjects []string `json:"missingObjects,omitempty"`
	// NotReady names the objects that exist but are not ready, and why: not
	// Current by kstatus, or an APIService that is not Available.
	NotReady []string `json:"notReady,omitempty"`
	// Degraded is true when the last apply ended Ready but some of the
	// plugin's objects are now missing or not ready: its API server died, its
	// Pods crash. The plugin's record is unchanged; NotReady says what.
	Degraded bool `json:"degraded,omitempty"`
	// Releases are the plugin's Helm releases as Helm records them:
	// "namespace/name: deployed (revision 2)".
	Releases []string `json:"releases,omitempty"`
}

// Status reports every installed plugin: its newest release record and how many of its objects
// exist and are Current.
func (d *Deployer) Status(ctx context.Context) ([]PluginStatus, error) {
	invs, err := d.Inventories(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]PluginStatus, len(invs))
	for i, inv := range invs {
		ps := PluginStatus{Plugin: inv.Plugin, Version: inv.Version, Revision: inv.Revision, Owner: OwnerName(inv.Owner), Phase: inv.Phase, Message: inv.Message, Objects: len(inv.Objects)}
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, d.opts.Concurrency)
		for _, r := range inv.Objects {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				ri, err := d.kc.ResourceFor(r)
				if err != nil {
					mu.Lock()
					ps.Missing++
					ps.MissingObjects = append(ps.MissingObjects, r.String())
					mu.Unlock()
					return
				}
				got, err := ri.Get(ctx, r.Name, metav1.GetOptions{})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case apierrors.IsNotFound(err):
					ps.Missing++
					ps.MissingObjects = append(ps.MissingObjects, r.String())
				case err != nil:
					ps.NotReady = append(ps.NotReady, r.String()+": "+err.Error())
				default:
					if ok, why := ssa.ReadyNow(got); ok {
						ps.Ready++
					} else {
						ps.NotReady = append(ps.NotReady, r.String()+": "+why)
					}
				}
			})
		}
		wg.Wait()
		slices.Sort(ps.NotReady)
		slices.Sort(ps.MissingObjects)
		ps.Degraded = inv.Phase == PhaseReady && (ps.Missing > 0 || len(ps.NotReady) > 0)
		for _, r := range inv.Releases {
			ps.Releases = append(ps.Releases, r.String()+": "+d.helm.Status(r))
		}
		out[i] = ps
	}
	return out, nil
}
