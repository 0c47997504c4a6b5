package deploy

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubeplug/kubeplug/pkg/deploy/state"
)

// RecordedObjects exposes the objects a revision recorded to tests.
func (d *Deployer) RecordedObjects(ctx context.Context, plugin string, revision int) ([]*unstructured.Unstructured, error) {
	recs, err := d.store.History(ctx, plugin)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if r.Revision == revision {
			return d.store.Objects(ctx, r)
		}
	}
	return nil, fmt.Errorf("plugin %s has no revision %d", plugin, revision)
}

// WriteChunksOnly writes the chunks of a revision and not its head, as a run
// killed between the two leaves them, and returns their names.
func (d *Deployer) WriteChunksOnly(ctx context.Context, plugin string, revision int, objs []*unstructured.Unstructured) ([]string, error) {
	r := &Record{Plugin: plugin, Revision: revision}
	err := d.store.(*state.Secrets).WriteChunks(ctx, r, objs)
	return r.Chunks, err
}

// ForgetResourceVersions rewrites a plugin's newest revision without the
// resourceVersions of its objects, as a kubeplug before them wrote it.
func (d *Deployer) ForgetResourceVersions(ctx context.Context, plugin string) error {
	cur, _, err := state.Latest(ctx, d.store, plugin)
	if err != nil || cur == nil {
		return fmt.Errorf("plugin %s: %v %w", plugin, cur, err)
	}
	cur.ResourceVersions = nil
	return d.store.Write(ctx, cur, nil)
}

// ForgetDigests rewrites a plugin's newest revision without the digests of its
// objects, as a kubeplug that kept them in an annotation on each object wrote it.
func (d *Deployer) ForgetDigests(ctx context.Context, plugin string) error {
	cur, _, err := state.Latest(ctx, d.store, plugin)
	if err != nil || cur == nil {
		return fmt.Errorf("plugin %s: %v %w", plugin, cur, err)
	}
	cur.Digests = nil
	return d.store.Write(ctx, cur, nil)
}
