package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	ri "helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/kubeplug/kubeplug/pkg/deploy/seal"
)

// sealDriver stores Helm releases with their sensitive values sealed (package
// seal): Helm's release Secret keeps the chart, the values and the manifest with
// a token in place of each sensitive value, so that `helm get values`, `helm get
// manifest` and the Secret itself never show one, and Helm gets the values back
// when it reads a release (a rollback re-applies them). `helm list` and `helm
// history` read the same Secrets as before.
type sealDriver struct {
	driver.Driver
	s *seal.Sealer
}

// sealTimeout bounds reading or making the key inside a Helm storage call, which
// has no context of its own.
const sealTimeout = 30 * time.Second

func (d sealDriver) Create(key string, rls ri.Releaser) error {
	sealed, err := d.seal(rls)
	if err != nil {
		return err
	}
	return d.Driver.Create(key, sealed)
}

func (d sealDriver) Update(key string, rls ri.Releaser) error {
	sealed, err := d.seal(rls)
	if err != nil {
		return err
	}
	return d.Driver.Update(key, sealed)
}

func (d sealDriver) Get(key string) (ri.Releaser, error) {
	r, err := d.Driver.Get(key)
	if err != nil {
		return r, err
	}
	return d.unseal(r)
}

func (d sealDriver) Delete(key string) (ri.Releaser, error) {
	r, err := d.Driver.Delete(key)
	if err != nil || r == nil {
		return r, err
	}
	return d.unseal(r)
}

func (d sealDriver) List(filter func(ri.Releaser) bool) ([]ri.Releaser, error) {
	rs, err := d.Driver.List(filter)
	if err != nil {
		return rs, err
	}
	return d.unsealAll(rs)
}

func (d sealDriver) Query(labels map[string]string) ([]ri.Releaser, error) {
	rs, err := d.Driver.Query(labels)
	if err != nil {
		return rs, err
	}
	return d.unsealAll(rs)
}

func (d sealDriver) unsealAll(rs []ri.Releaser) ([]ri.Releaser, error) {
	out := make([]ri.Releaser, len(rs))
	for i, r := range rs {
		u, err := d.unseal(r)
		if err != nil {
			return nil, err
		}
		out[i] = u
	}
	return out, nil
}

// seal returns a copy of rls with its sensitive values sealed, or rls itself
// when it holds none.
func (d sealDriver) seal(rls ri.Releaser) (ri.Releaser, error) {
	return d.through(rls, func(ctx context.Context, raw []byte) ([]byte, error) { return d.s.Seal(ctx, raw) })
}

func (d sealDriver) unseal(rls ri.Releaser) (ri.Releaser, error) {
	return d.through(rls, func(ctx context.Context, raw []byte) ([]byte, error) { return d.s.Unseal(ctx, raw) })
}

// through passes a release's JSON (the form Helm stores) through fn.
func (d sealDriver) through(rls ri.Releaser, fn func(context.Context, []byte) ([]byte, error)) (ri.Releaser, error) {
	r, err := asV1(rls)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode Helm release %s/%s: %w", r.Namespace, r.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sealTimeout)
	defer cancel()
	out, err := fn(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("Helm release %s/%s: %w", r.Namespace, r.Name, err) //nolint:staticcheck // Helm is a name
	}
	if string(out) == string(raw) {
		return rls, nil
	}
	sealed := &releasev1.Release{}
	if err := json.Unmarshal(out, sealed); err != nil {
		return nil, fmt.Errorf("decode Helm release %s/%s: %w", r.Namespace, r.Name, err)
	}
	sealed.Labels = r.Labels // not in the JSON: the driver stores them as the record's labels
	return sealed, nil
}
