package expansion

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Mirror says that the images of one registry, or of one repository prefix,
// are pulled from another place: images From/PATH:TAG are pulled from
// To/PATH:TAG. A package keeps each image under its own name, so the site sees
// the references its render names.
type Mirror struct {
	// From is a registry (registry.k8s.io, docker.io) or a repository prefix
	// (ghcr.io/kubeplug).
	From string
	// To is a registry, optionally with a path (127.0.0.1:5000,
	// mirror.example.com/k8s).
	To string
}

// ParseMirror reads a mirror as FROM=TO.
func ParseMirror(s string) (Mirror, error) {
	from, to, ok := strings.Cut(s, "=")
	from, to = strings.TrimSpace(from), strings.TrimSuffix(strings.TrimSpace(to), "/")
	if !ok || from == "" || to == "" {
		return Mirror{}, fmt.Errorf("expected FROM=TO, such as registry.k8s.io=127.0.0.1:5000/k8s, found %q", s)
	}
	m := Mirror{From: strings.TrimSuffix(from, "/"), To: to}
	if _, err := m.prefix(); err != nil {
		return Mirror{}, err
	}
	if _, err := name.NewRepository(to+"/x", name.WeakValidation); err != nil {
		return Mirror{}, fmt.Errorf("mirror %q: %q is not a registry or registry/path: %w", s, to, err)
	}
	return m, nil
}

// prefix is From's full repository name, as NormalizeImage spells it
// (docker.io is index.docker.io).
func (m Mirror) prefix() (string, error) {
	if !strings.Contains(m.From, "/") {
		r, err := name.NewRegistry(m.From, name.WeakValidation)
		if err != nil {
			return "", fmt.Errorf("mirror %s=%s: %q is not a registry: %w", m.From, m.To, m.From, err)
		}
		return r.Name(), nil
	}
	r, err := name.NewRepository(m.From, name.WeakValidation)
	if err != nil {
		return "", fmt.Errorf("mirror %s=%s: %q is not a registry or repository: %w", m.From, m.To, m.From, err)
	}
	return r.Name(), nil
}

// mirrored is where ref is pulled from under mirrors (the longest From that
// matches wins); ok is false when none matches.
func mirrored(ref name.Reference, mirrors []Mirror) (name.Reference, bool, error) {
	repo := ref.Context().Name()
	best, bestLen := Mirror{}, -1
	var rest string
	for _, m := range mirrors {
		p, err := m.prefix()
		if err != nil {
			return nil, false, err
		}
		if (repo == p || strings.HasPrefix(repo, p+"/")) && len(p) > bestLen {
			best, bestLen, rest = m, len(p), strings.TrimPrefix(repo, p)
		}
	}
	if bestLen < 0 {
		return nil, false, nil
	}
	sep := ":"
	if _, ok := ref.(name.Digest); ok {
		sep = "@"
	}
	to := best.To + rest + sep + ref.Identifier()
	out, err := name.ParseReference(to, name.WeakValidation)
	if err != nil {
		return nil, false, fmt.Errorf("image %s through mirror %s=%s: %q: %w", ref.Name(), best.From, best.To, to, err)
	}
	return out, true, nil
}
