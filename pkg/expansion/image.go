package expansion

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// CheckImageRef checks an image reference as expansion.yaml and a rendered
// manifest name images: it parses, and it names a tag or a digest (an expansion
// carries a fixed image, never "whatever latest is").
func CheckImageRef(s string) error {
	if _, err := name.ParseReference(s, name.WeakValidation); err != nil {
		return fmt.Errorf("expected an image reference such as registry.example.com/team/app:v1, found %q: %w", s, err)
	}
	last := s[strings.LastIndexByte(s, '/')+1:]
	if !strings.ContainsAny(last, ":@") {
		return fmt.Errorf("image %q names no tag or digest; expected one, such as %s:v1", s, s)
	}
	return nil
}

// NormalizeImage returns the full form of an image reference, with its registry
// and repository spelled out (nginx:1.27 is docker.io/library/nginx:1.27), so that
// two spellings of one image compare equal. A reference that does not parse is
// returned as it is.
func NormalizeImage(s string) string {
	ref, err := name.ParseReference(s, name.WeakValidation)
	if err != nil {
		return s
	}
	return ref.Name()
}
