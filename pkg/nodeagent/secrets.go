package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// BootSecrets is the provider's part of a machine's boot when the provider
// delivers it as an object the machine fetches with its own identity (the aws
// provider, through S3 and the instance role; render's BootSecretsDropIn runs
// FetchSecrets): the files to write, each with its mode. It is JSON; the
// content is base64, so keys survive any encoding.
type BootSecrets struct {
	// Files are written in order, each atomically (a temporary file renamed).
	Files []SecretFile `json:"files"`
	// Units are systemd units (among Files) started, without waiting, once
	// the files are written: the provider's own steps of the boot, as the
	// control-plane machine's store of the bootstrap token.
	Units []string `json:"units,omitempty"`
}

// SecretFile is one file of BootSecrets.
type SecretFile struct {
	// Path is an absolute, clean path on the machine.
	Path string `json:"path"`
	// Mode is octal, "0600" for keys and tokens.
	Mode string `json:"mode"`
	// Content is the file's bytes.
	Content []byte `json:"content"`
}

// MaxSecretsSize bounds a boot secrets object.
const MaxSecretsSize = 4 << 20

// FetchSecretsOptions configure FetchSecrets.
type FetchSecretsOptions struct {
	// URL is the object: s3://bucket/key. Required.
	URL string
	// Root is the directory the files' paths are relative to. Default "/".
	Root string
	// Wait is how long a missing object is waited for (its provider uploads it
	// once the machines' cloud resources are deployed, maybe after this machine
	// booted). Zero fails at once.
	Wait time.Duration
	// Interval is how often a missing object is asked for again. Default 5s.
	Interval time.Duration
	// S3Endpoint is as Options' (the machine's own identity by
	// default: the instance role on AWS).
	S3Endpoint string
	// StartUnits starts BootSecrets.Units. Nil: on the machine itself (Root
	// "/"), `systemctl daemon-reload` then `systemctl start --no-block`; under
	// another Root they are not this machine's, and not started.
	StartUnits func(ctx context.Context, units []string) error
	// Logger receives progress; discarded when nil.
	Logger *slog.Logger
}

// ErrSecretsMissing is a boot secrets object that was not there within
// FetchSecretsOptions.Wait.
var ErrSecretsMissing = errors.New("boot secrets not found")

// FetchSecrets downloads the machine's boot secrets (BootSecrets, JSON) from
// opts.URL and writes every file under opts.Root with its mode, each
// atomically, so that a boot interrupted half-way leaves whole files; a re-run
// writes them again. A missing object is asked for again until opts.Wait
// ends, then an error wrapping ErrSecretsMissing; every error names the URL.
// Nothing is written unless the whole object was read and is valid.
func FetchSecrets(ctx context.Context, opts FetchSecretsOptions) (*BootSecrets, error) {
	opts = opts.withDefaults()
	body, err := awaitObject(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("boot secrets %s: %w", opts.URL, err)
	}
	bs, modes, err := decodeSecrets(body)
	if err != nil {
		return nil, fmt.Errorf("boot secrets %s: %w", opts.URL, err)
	}
	for i, sf := range bs.Files {
		if err := writeAtomic(filepath.Join(opts.Root, filepath.FromSlash(sf.Path)), sf.Content, modes[i]); err != nil {
			return nil, fmt.Errorf("boot secrets %s: %w", opts.URL, err)
		}
	}
	opts.Logger.Info("boot secrets written", "url", opts.URL, "files", len(bs.Files))
	if err := startUnits(ctx, opts, bs.Units); err != nil {
		return nil, fmt.Errorf("boot secrets %s: start %s: %w", opts.URL, strings.Join(bs.Units, ", "), err)
	}
	return bs, nil
}

func (o FetchSecretsOptions) withDefaults() FetchSecretsOptions {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// awaitObject reads the object at opts.URL, asking again for one not there
// yet until opts.Wait ends.
func awaitObject(ctx context.Context, opts FetchSecretsOptions) ([]byte, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || u.Scheme != "s3" || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return nil, errors.New("expected s3://bucket/key")
	}
	open, err := openerOf("s3")
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(opts.Wait)
	for {
		body, err := getObject(ctx, open, u, &Options{S3Endpoint: opts.S3Endpoint})
		switch {
		case err == nil:
			return body, nil
		case !errors.Is(err, ErrNotThereYet):
			return nil, err
		case !time.Now().Before(deadline):
			return nil, fmt.Errorf("%w within %s: %w", ErrSecretsMissing, opts.Wait, err)
		}
		opts.Logger.Info("boot secrets not there yet", "url", opts.URL)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(opts.Interval):
		}
	}
}

// decodeSecrets decodes an object and checks each file's path and mode.
func decodeSecrets(body []byte) (*BootSecrets, []os.FileMode, error) {
	var bs BootSecrets
	if err := json.Unmarshal(body, &bs); err != nil {
		return nil, nil, fmt.Errorf("decode: %w", err)
	}
	modes := make([]os.FileMode, len(bs.Files))
	for i, sf := range bs.Files {
		m, err := strconv.ParseUint(sf.Mode, 8, 32)
		if !path.IsAbs(sf.Path) || path.Clean(sf.Path) != sf.Path || err != nil || m > 0o777 {
			return nil, nil, fmt.Errorf("files[%d]: expected an absolute clean path and an octal mode, found %q %q", i, sf.Path, sf.Mode)
		}
		modes[i] = os.FileMode(m)
	}
	return &bs, modes, nil
}

// startUnits starts units with opts.StartUnits, else with systemctl on the
// machine itself (Root "/").
func startUnits(ctx context.Context, opts FetchSecretsOptions, units []string) error {
	if len(units) == 0 {
		return nil
	}
	start := opts.StartUnits
	if start == nil && filepath.Clean(opts.Root) == "/" {
		start = systemctlStart
	}
	if start == nil {
		opts.Logger.Info("units not started: the root is not this machine's", "units", units)
		return nil
	}
	return start(ctx, units)
}

// systemctlStart reloads systemd's units and starts units without waiting.
func systemctlStart(ctx context.Context, units []string) error {
	for _, args := range [][]string{{"daemon-reload"}, append([]string{"start", "--no-block"}, units...)} {
		if out, err := exec.CommandContext(ctx, "systemctl", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("systemctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// ErrNotThereYet is an object not there, or not readable yet: an Opener
// wraps it for S3's 404 NoSuchKey, and for 403 AccessDenied, which a role
// that may not list the bucket gets for an object not uploaded yet (the boot
// secrets' roles may only get their own objects).
var ErrNotThereYet = errors.New("no such object yet")

// getObject reads a whole object of at most MaxSecretsSize bytes.
func getObject(ctx context.Context, open Opener, u *url.URL, o *Options) ([]byte, error) {
	body, err := open(ctx, u, o)
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	b, err := io.ReadAll(io.LimitReader(body, MaxSecretsSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSecretsSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxSecretsSize)
	}
	return b, nil
}

// writeAtomic writes content to file with mode through a temporary file in
// its directory, so that a reader sees the old file or the new one.
func writeAtomic(file string, content []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(content); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// EncodeBootSecrets is the object FetchSecrets reads.
func EncodeBootSecrets(bs *BootSecrets) ([]byte, error) { return json.Marshal(bs) }
