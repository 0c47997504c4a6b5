// Package oci stores plugin packages in OCI registries and fetches them back.
//
// A plugin is pushed as an OCI 1.1 artifact: an image manifest with the artifact type
// [ArtifactType], a small JSON config ([ConfigMediaType]) naming the plugin, its
// version and its package digest, and one layer, the package archive as `kubeplug
// plugin package` writes it ([LayerMediaType]). A plugin pushed under the prefix
// oci://HOST/PREFIX lives in the repository HOST/PREFIX/NAME, tagged with its version.
//
// Everything fetched is checked against a digest before use: the manifest against the
// digest the registry or the reference named, the config and the layer against the
// manifest's descriptors, and the unpacked package against the name, version and
// package digest the config announces.
//
// [PushReferrer] and [Referrers] attach artifacts (signatures, attestations) to a
// manifest and list them, through the OCI 1.1 referrers API or, for registries
// without it, the tag schema fallback (an index tagged sha256-HEX).
//
// Helm charts are pulled as `helm push` stores them ([Client.PullChart]), and their
// cosign signatures read where `cosign sign` stores them ([Client.CosignSignatures]:
// the image tagged sha256-HEX.sig beside the chart).
package oci

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// Media types of a plugin artifact.
const (
	ArtifactType    = "application/vnd.kubeplug.plugin.v1"
	ConfigMediaType = "application/vnd.kubeplug.plugin.config.v1+json"
	LayerMediaType  = "application/vnd.kubeplug.plugin.package.v1.tar+gzip"
)

// Scheme prefixes every registry reference kubeplug accepts.
const Scheme = "oci://"

// DefaultTimeout bounds each request to a registry when Options.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// maxManifest bounds a manifest or config read from a registry.
const maxManifest = 4 << 20

// MaxCAFileSize bounds a PEM file of certificate authorities (a system bundle
// is about 200 KiB).
const MaxCAFileSize = 4 << 20

// Config is the artifact's config blob.
type Config struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Digest is the package digest (see plugin.Digest), not the layer's.
	Digest string `json:"digest"`
}

// Options say how to reach a registry.
type Options struct {
	// PlainHTTP talks HTTP instead of HTTPS to every registry. A loopback
	// registry (IsLoopback) is spoken to in plain HTTP without it.
	PlainHTTP bool
	// CAFiles are PEM files of certificate authorities trusted besides the system's.
	CAFiles []string
	// Username and Password, when Username is set, are used for every registry
	// instead of the docker config file.
	Username, Password string
	// RegistryConfig is the docker config file holding credentials; empty means the
	// usual one ($DOCKER_CONFIG/config.json or ~/.docker/config.json).
	RegistryConfig string
	// Timeout bounds each request; zero means DefaultTimeout.
	Timeout time.Duration
}

// Client talks to registries with one set of Options.
type Client struct {
	opts Options
	http *auth.Client
	// probe asks a loopback registry which scheme it speaks (plainHTTP);
	// plain caches the answer per registry.
	probe *http.Client
	plain sync.Map // registry -> bool
}

// SystemRoots is a copy of the system's root CAs, or an empty pool where the
// system has none: the pool a CA of the user's is added to.
func SystemRoots() *x509.CertPool {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		return x509.NewCertPool()
	}
	return pool
}

// TransportTrusting is a clone of http.DefaultTransport whose TLS trusts
// exactly pool (TLS 1.2 at least).
func TransportTrusting(pool *x509.CertPool) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr
}

// New builds a Client: it reads the CA files and the credential store now, so a bad
// file is reported before any network traffic.
func New(opts Options) (*Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if len(opts.CAFiles) > 0 {
		pool := SystemRoots()
		for _, f := range opts.CAFiles {
			pem, err := bounded.ReadFileAs("CA file", f, MaxCAFileSize)
			if err != nil {
				return nil, err
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("CA file %s holds no PEM certificate", f)
			}
		}
		tr = TransportTrusting(pool)
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	tr.ResponseHeaderTimeout = timeout
	tr.DialContext = (&net.Dialer{Timeout: timeout}).DialContext
	tr.TLSHandshakeTimeout = timeout
	hc := &http.Client{Transport: retry.NewTransport(tr), Timeout: 4 * timeout, CheckRedirect: CheckRedirect}
	c := &auth.Client{Client: hc, Cache: auth.NewCache()}
	c.SetUserAgent("kubeplug")
	if opts.Username != "" {
		cred := auth.Credential{Username: opts.Username, Password: opts.Password}
		c.Credential = func(context.Context, string) (auth.Credential, error) { return cred, nil }
	} else {
		var store credentials.Store
		var err error
		if opts.RegistryConfig != "" {
			store, err = credentials.NewStore(opts.RegistryConfig, credentials.StoreOptions{})
		} else {
			store, err = credentials.NewStoreFromDocker(credentials.StoreOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read the registry credentials: %w", err)
		}
		c.Credential = credentials.Credential(store)
	}
	probe := &http.Client{Transport: tr, Timeout: probeTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Client{opts: opts, http: c, probe: probe}, nil
}

// Ref is a parsed oci:// reference.
type Ref struct {
	// Registry is HOST[:PORT].
	Registry string
	// Repository is the path under the registry.
	Repository string
	// Reference is the tag or digest; empty when none was given.
	Reference string
}

// ParseRef parses oci://HOST/REPO[:TAG|@DIGEST].
func ParseRef(s string) (Ref, error) {
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return Ref{}, fmt.Errorf("%q is not an OCI reference: it must start with %s", redact.URL(s), Scheme)
	}
	if host, _, _ := strings.Cut(rest, "/"); strings.Contains(host, "@") {
		return Ref{}, fmt.Errorf("invalid OCI reference %q: credentials do not belong in a reference (they would be printed); log in with docker login, or pass --username with --password-stdin", redact.URL(s))
	}
	r, err := registry.ParseReference(rest)
	if err != nil {
		// A bare repository without tag parses too; anything else is refused.
		// Credentials belong in the docker config, never in a printed reference.
		return Ref{}, redact.URLError(fmt.Errorf("invalid OCI reference %q: %w", redact.URL(s), err))
	}
	return Ref{Registry: r.Registry, Repository: r.Repository, Reference: r.Reference}, nil
}

// String gives the reference back as oci://….
func (r Ref) String() string {
	s := Scheme + r.Registry + "/" + r.Repository
	switch {
	case r.Reference == "":
	case strings.Contains(r.Reference, ":"):
		s += "@" + r.Reference
	default:
		s += ":" + r.Reference
	}
	return s
}

func (c *Client) repo(r Ref) (*remote.Repository, error) {
	repo, err := remote.NewRepository(r.Registry + "/" + r.Repository)
	if err != nil {
		return nil, fmt.Errorf("invalid repository %s/%s: %w", r.Registry, r.Repository, err)
	}
	repo.Client = c.http
	repo.PlainHTTP = c.plainHTTP(r.Registry)
	return repo, nil
}

// Pushed says what Push stored.
type Pushed struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Ref is the tagged reference; Manifest the manifest's digest.
	Ref      string `json:"ref"`
	Manifest string `json:"manifest"`
	// Digest is the package digest.
	Digest string `json:"digest"`
}

// Push stores the package archive file under the prefix oci://HOST/PREFIX as the
// repository PREFIX/NAME tagged VERSION. The archive is unpacked and its manifest
// read first: a broken package is refused before anything is uploaded.
func (c *Client) Push(ctx context.Context, file, prefix string) (*Pushed, error) {
	pr, err := ParseRef(prefix)
	if err != nil {
		return nil, err
	}
	if pr.Reference != "" {
		return nil, fmt.Errorf("%s: push to a repository prefix without a tag or digest; the plugin's version is the tag", prefix)
	}
	data, err := bounded.ReadFileAs("plugin archive", file, plugin.MaxPackageSize)
	if err != nil {
		return nil, err
	}
	cfg, err := inspect(data, file)
	if err != nil {
		return nil, err
	}
	target := Ref{Registry: pr.Registry, Repository: pr.Repository + "/" + cfg.Name, Reference: cfg.Version}
	repo, err := c.repo(target)
	if err != nil {
		return nil, err
	}
	cfgData, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cfgDesc := content.NewDescriptorFromBytes(ConfigMediaType, cfgData)
	layer := content.NewDescriptorFromBytes(LayerMediaType, data)
	layer.Annotations = map[string]string{ocispec.AnnotationTitle: cfg.Name + "-" + cfg.Version + archive.Ext}
	for _, b := range []struct {
		d ocispec.Descriptor
		b []byte
	}{{cfgDesc, cfgData}, {layer, data}} {
		if err := pushBlob(ctx, repo, b.d, b.b); err != nil {
			return nil, describe(target, err)
		}
	}
	man, err := packAndTag(ctx, repo, ArtifactType, cfgDesc, layer, cfg.Name, cfg.Version, cfg.Version)
	if err != nil {
		return nil, describe(target, err)
	}
	return &Pushed{Name: cfg.Name, Version: cfg.Version, Ref: target.String(), Manifest: man.Digest.String(), Digest: cfg.Digest}, nil
}

// packAndTag writes the manifest of an artifact of one config and one layer,
// titled name and version, and tags it. Its creation date is fixed, so that
// pushing the same content twice gives the same manifest.
func packAndTag(ctx context.Context, repo *remote.Repository, artifactType string, cfgDesc, layer ocispec.Descriptor, name, version, tag string) (ocispec.Descriptor, error) {
	man, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, artifactType, oras.PackManifestOptions{
		ConfigDescriptor: &cfgDesc,
		Layers:           []ocispec.Descriptor{layer},
		ManifestAnnotations: map[string]string{
			ocispec.AnnotationTitle:   name,
			ocispec.AnnotationVersion: version,
			ocispec.AnnotationCreated: "1970-01-01T00:00:00Z",
		},
	})
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return man, repo.Tag(ctx, man, tag)
}

func pushBlob(ctx context.Context, repo *remote.Repository, d ocispec.Descriptor, b []byte) error {
	ok, err := repo.Exists(ctx, d)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	err = repo.Push(ctx, d, bytes.NewReader(b))
	if errors.Is(err, errdef.ErrAlreadyExists) {
		return nil
	}
	return err
}

// inspect unpacks an archive in memory and reads its manifest and package digest.
func inspect(data []byte, location string) (*Config, error) {
	fsys, err := archive.Extract(bytes.NewReader(data), archive.Limits{})
	if err != nil {
		return nil, fmt.Errorf("%s: cannot unpack the plugin archive: %w", location, err)
	}
	m, l := plugin.ReadManifest(fsys, location)
	if m == nil {
		return nil, fmt.Errorf("%s: %w", location, l.Err())
	}
	d, err := plugin.Digest(fsys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", location, err)
	}
	return &Config{Name: m.Plugin.Metadata.Name, Version: m.Plugin.Metadata.Version, Digest: d}, nil
}

// Pulled is a package fetched from a registry, checked.
type Pulled struct {
	Config
	// Ref is the reference pulled, Manifest the manifest's digest.
	Ref      string
	Manifest string
	// Archive is the package archive's bytes.
	Archive []byte
}

// Pull fetches oci://HOST/REPO/NAME:VERSION or …@sha256:HEX. Every blob is checked
// against its digest, and the unpacked package against the config: its name (and the
// repository's last element), its version (and the tag, when pulled by tag) and its
// package digest.
func (c *Client) Pull(ctx context.Context, ref string) (*Pulled, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	if r.Reference == "" {
		return nil, fmt.Errorf("%s: name a version (…:VERSION) or a manifest digest (…@sha256:HEX)", ref)
	}
	repo, desc, man, err := c.fetchManifest(ctx, r, ref)
	if err != nil {
		return nil, err
	}
	if man.ArtifactType != ArtifactType || man.Config.MediaType != ConfigMediaType || len(man.Layers) != 1 || man.Layers[0].MediaType != LayerMediaType {
		return nil, fmt.Errorf("%s is not a kubeplug plugin (artifact type %q, config %q, %d layers); push one with 'kubeplug plugin push'",
			ref, man.ArtifactType, man.Config.MediaType, len(man.Layers))
	}
	cfgData, err := fetchBlob(ctx, repo, man.Config, maxManifest)
	if err != nil {
		return nil, fmt.Errorf("%s: config: %w", ref, describe(r, err))
	}
	var cfg Config
	if err := json.Unmarshal(cfgData, &cfg); err != nil {
		return nil, fmt.Errorf("%s: the config is not a kubeplug plugin config: %w", ref, err)
	}
	data, err := fetchBlob(ctx, repo, man.Layers[0], plugin.MaxPackageSize)
	if err != nil {
		return nil, fmt.Errorf("%s: package: %w", ref, describe(r, err))
	}
	got, err := inspect(data, ref)
	if err != nil {
		return nil, err
	}
	if *got != cfg {
		return nil, fmt.Errorf("%s: the package is %s@%s with digest %s, but the artifact announces %s@%s with digest %s",
			ref, got.Name, got.Version, got.Digest, cfg.Name, cfg.Version, cfg.Digest)
	}
	if base := r.Repository[strings.LastIndex(r.Repository, "/")+1:]; base != cfg.Name {
		return nil, fmt.Errorf("%s: the repository %s holds the plugin %s; a plugin is pushed to PREFIX/NAME", ref, r.Repository, cfg.Name)
	}
	if _, err := digest.Parse(r.Reference); err != nil && r.Reference != cfg.Version {
		return nil, fmt.Errorf("%s: the tag %s holds version %s of %s", ref, r.Reference, cfg.Version, cfg.Name)
	}
	return &Pulled{Config: cfg, Ref: ref, Manifest: desc.Digest.String(), Archive: data}, nil
}

// WriteArchive writes a pulled package to dir as NAME-VERSION.tgz and returns the path.
func (p *Pulled) WriteArchive(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f := filepath.Join(dir, p.Name+"-"+p.Version+archive.Ext)
	tmp, err := os.CreateTemp(dir, ".pull-*")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(p.Archive); err != nil {
		_ = tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), f); err != nil {
		return "", err
	}
	return f, nil
}

func fetchBlob(ctx context.Context, repo content.Fetcher, d ocispec.Descriptor, limit int64) ([]byte, error) {
	if d.Size < 0 || d.Size > limit {
		return nil, fmt.Errorf("blob %s is %d bytes, past the limit of %d", d.Digest, d.Size, limit)
	}
	rc, err := repo.Fetch(ctx, d)
	if err != nil {
		return nil, err
	}
	return readVerified(rc, d, limit)
}

// readVerified reads rc whole and checks its size and digest against d.
func readVerified(rc io.ReadCloser, d ocispec.Descriptor, limit int64) ([]byte, error) {
	defer func() { _ = rc.Close() }()
	if d.Size < 0 || d.Size > limit {
		return nil, fmt.Errorf("%s is %d bytes, past the limit of %d", d.Digest, d.Size, limit)
	}
	b, err := io.ReadAll(io.LimitReader(rc, d.Size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != d.Size {
		return nil, fmt.Errorf("size mismatch: expected %d bytes, found %d", d.Size, len(b))
	}
	if err := d.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("invalid digest %q: %w", d.Digest, err)
	}
	if found := d.Digest.Algorithm().FromBytes(b); found != d.Digest {
		return nil, fmt.Errorf("digest mismatch: expected %s, found %s", d.Digest, found)
	}
	return b, nil
}

// describe turns registry errors into messages that name the registry, the
// repository and what to do.
func describe(r Ref, err error) error {
	var er *errcode.ErrorResponse
	if errors.As(err, &er) {
		where := r.Registry + "/" + r.Repository
		switch er.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("registry %s refused access to %s (%d %s): log in (docker login / --username with --password-stdin) or check the credentials: %w",
				r.Registry, where, er.StatusCode, http.StatusText(er.StatusCode), err)
		case http.StatusNotFound:
			return fmt.Errorf("%s: not found in registry %s (404): %w", r, r.Registry, err)
		}
		if er.StatusCode >= 500 {
			return fmt.Errorf("registry %s failed (%d %s) for %s; try again later: %w", r.Registry, er.StatusCode, http.StatusText(er.StatusCode), where, err)
		}
	}
	if errors.Is(err, auth.ErrBasicCredentialNotFound) {
		return fmt.Errorf("registry %s asks for credentials (401 Unauthorized) for %s/%s: log in (docker login / --username with --password-stdin): %w",
			r.Registry, r.Registry, r.Repository, err)
	}
	if errors.Is(err, errdef.ErrNotFound) {
		return fmt.Errorf("%s: not found in registry %s: %w", r, r.Registry, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("registry %s did not answer in time: %w", r.Registry, err)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return fmt.Errorf("cannot reach registry %s: %w", r.Registry, err)
	}
	return err
}

// fetchManifest fetches the manifest r names (ref as the user wrote it, for
// errors) from its repository, checked against its digest and bounded, and
// decodes it.
func (c *Client) fetchManifest(ctx context.Context, r Ref, ref string) (*remote.Repository, ocispec.Descriptor, *ocispec.Manifest, error) {
	repo, err := c.repo(r)
	if err != nil {
		return nil, ocispec.Descriptor{}, nil, err
	}
	desc, rc, err := repo.FetchReference(ctx, r.Reference)
	if err != nil {
		return nil, ocispec.Descriptor{}, nil, describe(r, err)
	}
	manData, err := readVerified(rc, desc, maxManifest)
	if err != nil {
		return nil, ocispec.Descriptor{}, nil, fmt.Errorf("%s: manifest: %w", ref, err)
	}
	man, err := decodeManifest(manData)
	if err != nil {
		return nil, ocispec.Descriptor{}, nil, fmt.Errorf("%s: %w", ref, err)
	}
	return repo, desc, man, nil
}

func decodeManifest(b []byte) (*ocispec.Manifest, error) {
	var man ocispec.Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return nil, fmt.Errorf("the manifest is not an OCI image manifest: %w", err)
	}
	return &man, nil
}
