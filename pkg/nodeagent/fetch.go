package nodeagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
)

// MaxScriptSize bounds a downloaded hook script, so that a wrong URL cannot fill the
// machine's disk.
const MaxScriptSize = 64 << 20

// ErrDigestMismatch is a downloaded script whose sha256 is not the one its hook pins:
// it is not run.
var ErrDigestMismatch = errors.New("digest mismatch")

// fetcher downloads the scripts of url hooks into a cache keyed by their digest.
type fetcher struct {
	dir  string
	opts *Options
}

// fetch returns the path of the cached script with digest sum, downloading it from
// rawURL first when the cache lacks it. The download is bounded by
// Options.FetchTimeout; what it yields is checked against sum before it is kept.
func (f *fetcher) fetch(ctx context.Context, rawURL, sum string) (string, error) {
	file := filepath.Join(f.dir, sum)
	if got, err := fileDigest(file); err == nil && got == sum {
		return file, nil
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.FetchTimeout)
	defer cancel()
	body, err := f.open(ctx, rawURL)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			return "", fmt.Errorf("download %s: no answer within %s: %w", rawURL, f.opts.FetchTimeout, err)
		}
		return "", fmt.Errorf("download %s: %w", rawURL, err)
	}
	defer func() { _ = body.Close() }()
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return "", fmt.Errorf("download %s: %w", rawURL, err)
	}
	tmp, err := os.CreateTemp(f.dir, ".download-*")
	if err != nil {
		return "", fmt.Errorf("download %s: %w", rawURL, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(body, MaxScriptSize+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return "", fmt.Errorf("download %s: not complete within %s: %w", rawURL, f.opts.FetchTimeout, err)
	case err != nil:
		return "", fmt.Errorf("download %s: %w", rawURL, err)
	case n > MaxScriptSize:
		return "", fmt.Errorf("download %s: larger than %d bytes", rawURL, MaxScriptSize)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return "", fmt.Errorf("refusing to run %s: %w: expected sha256 %s, found %s", rawURL, ErrDigestMismatch, sum, got)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return "", fmt.Errorf("cache %s: %w", rawURL, err)
	}
	return file, nil
}

// open starts the download of rawURL, a URL CheckURL accepted.
func (f *fetcher) open(ctx context.Context, rawURL string) (io.ReadCloser, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse the url: %w", err)
	}
	switch u.Scheme {
	case "https":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return nil, fmt.Errorf("build the request: %w", err)
		}
		resp, err := f.opts.HTTPClient.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			_ = resp.Body.Close()
			return nil, fmt.Errorf("expected 200 OK, found %s", resp.Status)
		}
		return resp.Body, nil
	}
	open, err := openerOf(u.Scheme)
	switch {
	case err != nil && u.Scheme != "s3":
		return nil, fmt.Errorf("expected an https:// or s3:// URL, found %q", rawURL)
	case err != nil:
		return nil, err
	}
	return open(ctx, u, f.opts)
}

// openerOf is the Opener registered for scheme; an error says which package
// to link when none is.
func openerOf(scheme string) (Opener, error) {
	openersMu.RLock()
	open := openers[scheme]
	openersMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("this program reads no %s:// URL (it links no client for it: kubeplug does, through its nodeagent/%sfetch package)", scheme, scheme)
	}
	return open, nil
}

// Opener starts the download of u, a URL of the scheme it is registered for.
type Opener func(ctx context.Context, u *url.URL, opts *Options) (io.ReadCloser, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// RegisterScheme makes open the way URLs of scheme are downloaded (s3://, by
// package s3fetch): a program that needs a cloud's store links its client,
// and the agent links none. Registering a scheme twice panics.
func RegisterScheme(scheme string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[scheme]; dup || scheme == "https" {
		panic("nodeagent: scheme " + scheme + " registered twice")
	}
	openers[scheme] = open
}

// fileDigest is the hex sha256 of file's content.
func fileDigest(file string) (string, error) {
	r, err := os.Open(file) //nolint:gosec // a path inside the agent's cache
	if err != nil {
		return "", err
	}
	defer func() { _ = r.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
