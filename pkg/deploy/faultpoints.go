package deploy

import (
	ri "helm.sh/helm/v4/pkg/release"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/kubeplug/kubeplug/internal/faultpoint"
)

// faultDriver marks fault points inside a Helm SDK call, where Helm writes its
// release records: right after it recorded a release pending (before it touches
// the release's objects), and right before it records one deployed (after it
// applied them). A run killed at either leaves the release pending-*, the state
// Helm itself never recovers from. Used only when a fault point is set.
type faultDriver struct{ driver.Driver }

func (f faultDriver) Create(key string, rls ri.Releaser) error {
	err := f.Driver.Create(key, rls)
	if r, e := asV1(rls); err == nil && e == nil && r.Info != nil && r.Info.Status.IsPending() {
		faultpoint.Hit("helm:pending-recorded")
	}
	return err
}

func (f faultDriver) Update(key string, rls ri.Releaser) error {
	if r, e := asV1(rls); e == nil && r.Info != nil && r.Info.Status == rcommon.StatusDeployed {
		faultpoint.Hit("helm:before-deployed-recorded")
	}
	return f.Driver.Update(key, rls)
}
