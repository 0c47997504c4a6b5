package realnode

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushImage pushes img as repo:tag to the registry, unless that tag already
// names it, and returns the reference pushed.
func (r *Registry) PushImage(ctx context.Context, repo, tag string, img v1.Image) (string, error) {
	if img == nil {
		return "", errors.New("push: no image")
	}
	ref, err := name.ParseReference(r.Addr()+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		return "", err
	}
	want, err := img.Digest()
	if err != nil {
		return "", err
	}
	if desc, err := remote.Head(ref, remote.WithContext(ctx)); err == nil && desc.Digest == want {
		return ref.String(), nil
	}
	if err := write(ctx, ref, r.Progress, func(o ...remote.Option) error { return remote.Write(ref, img, o...) }); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	return ref.String(), nil
}
