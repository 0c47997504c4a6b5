package k8sversions

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// MirrorEnv names the environment variable with the base URL of a mirror laid
// out like the official release locations: the official URL's host, then its
// path, under the base (https://dl.k8s.io/release/v1.37.1/bin/linux/amd64/kubelet
// is <mirror>/dl.k8s.io/release/v1.37.1/bin/linux/amd64/kubelet).
const MirrorEnv = "KUBEPLUG_K8S_MIRROR"

// Sentinel errors of the cache.
var (
	// ErrUnreachable means the release location (or mirror) could not be
	// connected to at all: no name resolution, no route, refused. Callers fall
	// back to binaries built from Go modules.
	ErrUnreachable = errors.New("release location unreachable")
	// ErrDownload means a file could not be fetched whole: an HTTP error status,
	// a truncated body, a server that stopped sending.
	ErrDownload = errors.New("download failed")
	// ErrChecksum means a fetched file's digest is not the published one. The
	// error is a *ChecksumError.
	ErrChecksum = errors.New("checksum mismatch")
)

// ChecksumError is a fetched file whose digest is not the one its release
// publishes. It is never retried or fallen back from: it is refused.
type ChecksumError struct {
	File, URL, Algorithm string
	Want, Got            string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s: %s from %s: published %s %s, downloaded file has %s",
		ErrChecksum, e.File, e.URL, e.Algorithm, e.Want, e.Got)
}

// Unwrap makes errors.Is(err, ErrChecksum) true.
func (e *ChecksumError) Unwrap() error { return ErrChecksum }

// Cache is the per-version binary cache: <Dir>/<version>/bin holds every
// artifact of the version, each beside a record of its digest
// (.<name>.sha256) that Verify checks on every use. The zero value is usable;
// every field documents its default.
type Cache struct {
	// Dir is the cache's root. Default: os.UserCacheDir()/kubeplug/k8s.
	Dir string
	// Mirror is the base URL of a mirror (see MirrorEnv). Default: $KUBEPLUG_K8S_MIRROR,
	// else the official locations.
	Mirror string
	// Table lists the artifacts. Default: Default().
	Table *Table
	// DialTimeout bounds connecting to a server; a network that cannot be
	// reached is told within it. Default 3s.
	DialTimeout time.Duration
	// StallTimeout bounds waiting for the response headers and for each read of
	// a body: a server that stops sending fails within it. Default 15s.
	StallTimeout time.Duration
	// Progress receives one line per step (a download, a corrupted file
	// replaced). Default none.
	Progress func(string)
	// GOOS and GOARCH pick the release files. Default: this machine's.
	GOOS, GOARCH string
}

func (c *Cache) defaults() (*Cache, error) {
	o := *c
	if o.Dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("binary cache directory: %w", err)
		}
		o.Dir = filepath.Join(base, "kubeplug", "k8s")
	}
	if o.Mirror == "" {
		o.Mirror = os.Getenv(MirrorEnv)
	}
	if o.Table == nil {
		o.Table = Default()
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 3 * time.Second
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = 15 * time.Second
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	if o.GOOS == "" {
		o.GOOS = runtime.GOOS
	}
	if o.GOARCH == "" {
		o.GOARCH = runtime.GOARCH
	}
	return &o, nil
}

// BinDir is where version v's binaries are (or go): <Dir>/<version>/bin.
func (c *Cache) BinDir(v Version) (string, error) {
	o, err := c.defaults()
	if err != nil {
		return "", err
	}
	return o.binDir(v), nil
}

func (c *Cache) binDir(v Version) string { return filepath.Join(c.Dir, v.Kubernetes, "bin") }

// Cached says whether every artifact of v is in the cache with the digest
// recorded when it was fetched. A file whose digest differs (corrupted on disk)
// is removed, said in the progress, and makes the answer false.
func (c *Cache) Cached(ctx context.Context, v Version) (bool, error) {
	o, err := c.defaults()
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(o.binDir(v)); errors.Is(err, os.ErrNotExist) {
		return false, nil // nothing cached, nothing to lock or create
	}
	unlock, err := o.lock(ctx, v)
	if err != nil {
		return false, err
	}
	defer unlock()
	missing, err := o.check(v)
	return len(missing) == 0, err
}

// check verifies every cached artifact against its record and returns the
// ones to fetch; a corrupted one is removed. Called with the lock held.
func (c *Cache) check(v Version) ([]Artifact, error) {
	var missing []Artifact
	dir := c.binDir(v)
	for _, a := range c.Table.Artifacts {
		path := filepath.Join(dir, a.Name)
		rec, err := os.ReadFile(recordPath(path))
		if errors.Is(err, os.ErrNotExist) {
			missing = append(missing, a)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the digest record of %s: %w", path, err)
		}
		want := strings.TrimSpace(string(rec))
		got, err := fileDigest(path, sha256.New())
		if err == nil && got == want {
			continue
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("verify %s: %w", path, err)
		}
		c.Progress(fmt.Sprintf("cached %s of Kubernetes %s is corrupted (sha256 %s, recorded %s); fetching it again", a.Name, v.Kubernetes, orNone(got), want))
		for _, p := range []string{recordPath(path), path} {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("remove corrupted %s: %w", p, err)
			}
		}
		missing = append(missing, a)
	}
	return missing, nil
}

func orNone(s string) string {
	if s == "" {
		return "none: the file is gone"
	}
	return s
}

// Ensure fills the cache with every artifact of v not already there (or
// corrupted), downloading each from its release location or the mirror and
// verifying it against the published digest, and returns the bin directory.
// Each file is written to a temporary name and renamed into place, and the
// version's directory is locked, so concurrent runs and interrupted ones never
// leave a partial file under an artifact's name. The first connection error
// returns ErrUnreachable at once: no retries.
func (c *Cache) Ensure(ctx context.Context, v Version) (string, error) {
	o, err := c.defaults()
	if err != nil {
		return "", err
	}
	unlock, err := o.lock(ctx, v)
	if err != nil {
		return "", err
	}
	defer unlock()
	missing, err := o.check(v)
	if err != nil {
		return "", err
	}
	client := o.client()
	for _, a := range missing {
		if err := o.fetch(ctx, client, v, a); err != nil {
			return "", err
		}
	}
	return o.binDir(v), nil
}

func (c *Cache) client() *http.Client {
	d := &net.Dialer{Timeout: c.DialTimeout}
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   c.DialTimeout + c.StallTimeout,
		ResponseHeaderTimeout: c.StallTimeout,
		MaxIdleConnsPerHost:   4,
	}}
}

// URL is where u is fetched from: u itself, or u under the mirror.
func (c *Cache) url(u string) (string, error) {
	if c.Mirror == "" {
		return u, nil
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("release URL %q: %w", u, err)
	}
	return strings.TrimSuffix(c.Mirror, "/") + "/" + parsed.Host + parsed.EscapedPath(), nil
}

// fetch downloads one artifact into the cache.
func (c *Cache) fetch(ctx context.Context, client *http.Client, v Version, a Artifact) error {
	expand := func(s string) string { return v.expand(s, c.GOOS, c.GOARCH) }
	fileURL, err := c.url(expand(a.URL))
	if err != nil {
		return err
	}
	sumURL, err := c.url(expand(a.Checksum.URL))
	if err != nil {
		return err
	}
	want, err := c.publishedDigest(ctx, client, a, sumURL, expand(a.Checksum.Name))
	if err != nil {
		return err
	}
	dir := c.binDir(v)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	c.Progress(fmt.Sprintf("downloading %s of Kubernetes %s from %s", a.Name, v.Kubernetes, fileURL))
	dl, err := os.CreateTemp(dir, "."+a.Name+".download-*")
	if err != nil {
		return fmt.Errorf("create a temporary file in %s: %w", dir, err)
	}
	defer func() { _ = os.Remove(dl.Name()) }()
	h := newHash(a.Checksum.Algorithm)
	if err := c.get(ctx, client, fileURL, io.MultiWriter(dl, h)); err != nil {
		_ = dl.Close()
		return err
	}
	if err := dl.Close(); err != nil {
		return fmt.Errorf("write %s: %w", dl.Name(), err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return &ChecksumError{File: a.Name, URL: fileURL, Algorithm: a.Checksum.Algorithm, Want: want, Got: got}
	}
	bin := dl.Name()
	if a.Member != "" {
		if bin, err = extract(dl.Name(), expand(a.Member), dir, a.Name); err != nil {
			return fmt.Errorf("%s from %s: %w", a.Name, fileURL, err)
		}
		defer func() { _ = os.Remove(bin) }()
	}
	if err := os.Chmod(bin, 0o755); err != nil { //nolint:gosec // an executable
		return fmt.Errorf("make %s executable: %w", bin, err)
	}
	digest, err := fileDigest(bin, sha256.New())
	if err != nil {
		return err
	}
	// The record first, then the binary: a binary without its record is never
	// taken as cached, a record without its binary is a corrupted entry.
	path := filepath.Join(dir, a.Name)
	if err := writeAtomic(recordPath(path), []byte(digest+"\n")); err != nil {
		return err
	}
	if err := os.Rename(bin, path); err != nil {
		return fmt.Errorf("move %s into the cache: %w", a.Name, err)
	}
	return nil
}

// publishedDigest reads the artifact's published digest.
func (c *Cache) publishedDigest(ctx context.Context, client *http.Client, a Artifact, sumURL, name string) (string, error) {
	var b strings.Builder
	if err := c.get(ctx, client, sumURL, &limitWriter{w: &b, n: 1 << 20}); err != nil {
		return "", err
	}
	size := 64
	if a.Checksum.Algorithm == "sha512" {
		size = 128
	}
	valid := func(s string) bool {
		_, err := hex.DecodeString(s)
		return len(s) == size && err == nil
	}
	s := bufio.NewScanner(strings.NewReader(b.String()))
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 0 {
			continue
		}
		d := strings.ToLower(fields[0])
		switch {
		case a.Checksum.Kind == "file" && valid(d):
			return d, nil
		case a.Checksum.Kind == "sums" && len(fields) == 2 && strings.TrimPrefix(fields[1], "*") == name && valid(d):
			return d, nil
		}
	}
	if a.Checksum.Kind == "sums" {
		return "", fmt.Errorf("%w: %s lists no %s digest of %s", ErrDownload, sumURL, a.Checksum.Algorithm, name)
	}
	return "", fmt.Errorf("%w: %s holds no %s digest", ErrDownload, sumURL, a.Checksum.Algorithm)
}

// get copies the body of u into w. A connection error is ErrUnreachable; a
// status other than 200, a short body or a stall is ErrDownload.
func (c *Cache) get(ctx context.Context, client *http.Client, u string, w io.Writer) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrDownload, u, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		if unreachable(err) {
			return fmt.Errorf("%w: %s: %w", ErrUnreachable, u, err)
		}
		return fmt.Errorf("%w: %s: %w", ErrDownload, u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s: %s", ErrDownload, u, resp.Status)
	}
	stalled := fmt.Errorf("%w: %s: no data for %s", ErrDownload, u, c.StallTimeout)
	timer := time.AfterFunc(c.StallTimeout, func() { cancel(stalled) })
	defer timer.Stop()
	n, err := io.Copy(w, &resetReader{r: resp.Body, reset: func() { timer.Reset(c.StallTimeout) }})
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrDownload) {
			return cause
		}
		return fmt.Errorf("%w: %s after %d bytes: %w", ErrDownload, u, n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return fmt.Errorf("%w: %s: truncated, %d of %d bytes", ErrDownload, u, n, resp.ContentLength)
	}
	return nil
}

// unreachable says whether err means no connection could be made at all.
func unreachable(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

type resetReader struct {
	r     io.Reader
	reset func()
}

func (r *resetReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.reset()
	}
	return n, err
}

type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		return 0, errors.New("checksum file too large")
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}

func newHash(algorithm string) hash.Hash {
	if algorithm == "sha512" {
		return sha512.New()
	}
	return sha256.New()
}

func recordPath(bin string) string {
	return filepath.Join(filepath.Dir(bin), "."+filepath.Base(bin)+".sha256")
}

func fileDigest(path string, h hash.Hash) (string, error) {
	f, err := os.Open(path) //nolint:gosec // a cache file
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// extract copies member of the .tar.gz archive into a temporary file in dir.
func extract(archive, member, dir, name string) (string, error) {
	f, err := os.Open(archive) //nolint:gosec // our temporary file
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return "", fmt.Errorf("read the archive: %w", err)
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("the archive holds no %s", member)
		}
		if err != nil {
			return "", fmt.Errorf("read the archive: %w", err)
		}
		if hdr.Typeflag != tar.TypeReg || strings.TrimPrefix(hdr.Name, "./") != member {
			continue
		}
		out, err := os.CreateTemp(dir, "."+name+".extract-*")
		if err != nil {
			return "", err
		}
		if _, err := io.Copy(out, io.LimitReader(tr, hdr.Size)); err != nil { //nolint:gosec // size from a verified archive
			_ = out.Close()
			_ = os.Remove(out.Name())
			return "", fmt.Errorf("extract %s: %w", member, err)
		}
		if err := out.Close(); err != nil {
			_ = os.Remove(out.Name())
			return "", err
		}
		return out.Name(), nil
	}
}
