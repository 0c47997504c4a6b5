package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// digestRE is what a package digest looks like.
var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Cache keeps downloaded package archives by package digest in a directory, as
// DIR/sha256/HEX.tgz. Entries are not trusted: a source unpacks a cached archive and
// checks its digest on every use, dropping an entry that no longer matches. A nil
// *Cache caches nothing.
type Cache struct {
	Dir string
}

// DefaultCache returns the cache under the user's cache directory
// (os.UserCacheDir()/kubeplug/packages), or nil when there is none.
func DefaultCache() *Cache {
	d, err := os.UserCacheDir()
	if err != nil {
		return nil
	}
	return &Cache{Dir: filepath.Join(d, "kubeplug", "packages")}
}

func (c *Cache) path(digest string) (string, error) {
	if !digestRE.MatchString(digest) {
		return "", fmt.Errorf("invalid digest %q", digest)
	}
	return filepath.Join(c.Dir, "sha256", strings.TrimPrefix(digest, "sha256:")+".tgz"), nil
}

// Get returns the cached archive of digest; an error when there is none.
func (c *Cache) Get(digest string) ([]byte, error) {
	if c == nil {
		return nil, errors.New("no cache")
	}
	p, err := c.path(digest)
	if err != nil {
		return nil, err
	}
	return bounded.ReadFile(p, plugin.MaxPackageSize)
}

// Put stores the archive of digest, atomically.
func (c *Cache) Put(digest string, data []byte) error {
	if c == nil {
		return nil
	}
	p, err := c.path(digest)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("create cache directory: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("create cache entry: %w", err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write cache entry: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write cache entry: %w", err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return fmt.Errorf("store cache entry: %w", err)
	}
	return nil
}

// Remove drops the entry of digest, if any.
func (c *Cache) Remove(digest string) {
	if c == nil {
		return
	}
	if p, err := c.path(digest); err == nil {
		_ = os.Remove(p)
	}
}
