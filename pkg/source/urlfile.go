package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/kubeplug/kubeplug/internal/bounded"
)

// Limits on a node file downloaded from a URL (nodes[].files[].url): a binary
// past the package size limit, but not without bound.
const (
	// MaxURLFileSize bounds one download.
	MaxURLFileSize = 512 << 20
	// URLFileTimeout bounds one download, connecting included.
	URLFileTimeout = 5 * time.Minute
)

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// URLFiles downloads node files from their URLs, each pinned by the hex
// SHA-256 the plugin wrote, and keeps them by digest as DIR/sha256/HEX. A
// cached entry is checked on every use (and dropped when it no longer
// matches), so a file once fetched renders without the network. The zero
// value downloads with the limits above and caches nothing.
type URLFiles struct {
	// Dir is the cache directory; empty caches nothing.
	Dir string
	// Client makes the requests; nil is a client without proxies' surprises
	// beyond the environment's (http.DefaultTransport).
	Client *http.Client
	// MaxSize and Timeout are per download; zero means MaxURLFileSize and
	// URLFileTimeout.
	MaxSize int64
	Timeout time.Duration
}

// DefaultURLFiles caches under the user's cache directory
// (os.UserCacheDir()/kubeplug/files), or nowhere when there is none.
func DefaultURLFiles() *URLFiles {
	d, err := os.UserCacheDir()
	if err != nil {
		return &URLFiles{}
	}
	return &URLFiles{Dir: filepath.Join(d, "kubeplug", "files")}
}

// Get returns the bytes of url whose hex SHA-256 is sum: from the cache, else
// downloaded, checked and cached. A download of other bytes is an error naming
// the URL and both digests.
func (u *URLFiles) Get(ctx context.Context, url, sum string) ([]byte, error) {
	if !sha256RE.MatchString(sum) {
		return nil, fmt.Errorf("%s: sha256 %q is not 64 lower-case hex digits", url, sum)
	}
	if b, ok := u.cached(sum); ok {
		return b, nil
	}
	b, err := u.download(ctx, url)
	if err != nil {
		return nil, err
	}
	if got := digest(b); got != sum {
		return nil, fmt.Errorf("%s: downloaded %s with sha256 %s, but the plugin pins sha256 %s", url, bounded.Size(int64(len(b))), got, sum)
	}
	// A cache that cannot be written costs the next render a download, no more.
	_ = u.put(sum, b)
	return b, nil
}

// Fetch downloads url once, whatever it serves, and returns the hex SHA-256
// of its bytes, keeping them in the cache under it: for an importer that
// writes the digest a plugin will pin (kube-aws gives none), so that the
// render after the import finds the file without downloading it again.
func (u *URLFiles) Fetch(ctx context.Context, url string) (string, error) {
	b, err := u.download(ctx, url)
	if err != nil {
		return "", err
	}
	sum := digest(b)
	_ = u.put(sum, b) // as in Get: a cache that cannot be written costs a download
	return sum, nil
}

// Keep puts b in the cache under its hex SHA-256, which it returns: bytes
// fetched another way (kube-aws's own download of a url) that a render will
// ask Get for.
func (u *URLFiles) Keep(b []byte) (string, error) {
	sum := digest(b)
	return sum, u.put(sum, b)
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (u *URLFiles) max() int64 {
	if u.MaxSize > 0 {
		return u.MaxSize
	}
	return MaxURLFileSize
}

func (u *URLFiles) entry(sum string) string { return filepath.Join(u.Dir, "sha256", sum) }

func (u *URLFiles) cached(sum string) ([]byte, bool) {
	if u.Dir == "" {
		return nil, false
	}
	b, err := bounded.ReadFile(u.entry(sum), u.max())
	if err != nil {
		return nil, false
	}
	if digest(b) != sum {
		_ = os.Remove(u.entry(sum))
		return nil, false
	}
	return b, true
}

func (u *URLFiles) download(ctx context.Context, url string) ([]byte, error) {
	timeout := u.Timeout
	if timeout <= 0 {
		timeout = URLFileTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	c := u.Client
	if c == nil {
		c = &http.Client{}
	}
	resp, err := c.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: no answer within %s", url, timeout)
		}
		return nil, fmt.Errorf("download %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: the server answered %s", url, resp.Status)
	}
	limit := u.max()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: the download took longer than %s", url, timeout)
		}
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: the file is larger than the %s limit of a downloaded node file", url, bounded.Size(limit))
	}
	return b, nil
}

// put stores b as the entry of sum, atomically.
func (u *URLFiles) put(sum string, b []byte) error {
	if u.Dir == "" {
		return nil
	}
	p := u.entry(sum)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}
