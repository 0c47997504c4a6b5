package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/kubeplug/kubeplug/pkg/provider/nodeimage"
)

// PushBuiltins pushes each built-in image whose binary is in dir (missing ones
// are skipped and returned: the user can load them with `kubeplug image load`).
func (r *Registry) PushBuiltins(ctx context.Context, dir string) (missing []string, err error) {
	for _, b := range nodeimage.BuiltinImages {
		bin := filepath.Join(dir, b.Binary)
		if _, err := os.Stat(bin); err != nil {
			if !b.OnDemand {
				missing = append(missing, b.Image)
			}
			continue
		}
		t, err := name.NewTag(b.Image)
		if err != nil {
			return missing, err
		}
		if _, err := r.PushBinary(ctx, t.RepositoryStr(), t.TagStr(), bin); err != nil {
			return missing, fmt.Errorf("built-in image %s: %w", b.Image, err)
		}
	}
	return missing, nil
}
