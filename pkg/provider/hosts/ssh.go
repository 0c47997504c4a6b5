package hosts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// ErrHostKey is a host key that is not the known one: unknown (and not
// accepted) or changed. The error names the key's SHA256 fingerprint.
var ErrHostKey = errors.New("host key not trusted")

// hostKeys checks host keys against a known_hosts file. With acceptNew, an
// unknown host's key is appended to the file; a changed key is refused either
// way.
type hostKeys struct {
	file      string
	acceptNew bool
	mu        sync.Mutex // the file, between parallel connections
}

// callback is the ssh.HostKeyCallback for one connection; label names the
// host in errors.
func (k *hostKeys) callback(label string) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		k.mu.Lock()
		defer k.mu.Unlock()
		check, err := k.load()
		if err != nil {
			return err
		}
		err = check(hostname, remote, key)
		var ke *knownhosts.KeyError
		if err == nil || !errors.As(err, &ke) {
			return err
		}
		fp := ssh.FingerprintSHA256(key)
		if len(ke.Want) > 0 {
			var known []string
			for _, w := range ke.Want {
				known = append(known, fmt.Sprintf("%s (%s line %d)", ssh.FingerprintSHA256(w.Key), w.Filename, w.Line))
			}
			return fmt.Errorf("%s: %w: its %s key %s CHANGED; %s knows %s. If the host was reinstalled, remove its line from %s; kubeplug never replaces a known key",
				label, ErrHostKey, key.Type(), fp, k.file, strings.Join(known, ", "), k.file)
		}
		if !k.acceptNew {
			return fmt.Errorf("%s: %w: its %s key %s is not in %s; check the fingerprint on the host (ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub) and run with --accept-new-host-keys to add it",
				label, ErrHostKey, key.Type(), fp, k.file, keyFileType(key.Type()))
		}
		return k.add(hostname, remote, key)
	}
}

// load reads the known_hosts file; a missing one knows no host.
func (k *hostKeys) load() (ssh.HostKeyCallback, error) {
	if _, err := os.Stat(k.file); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(k.file), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(k.file, nil, 0o600); err != nil {
			return nil, fmt.Errorf("known hosts: %w", err)
		}
	}
	cb, err := knownhosts.New(k.file)
	if err != nil {
		return nil, fmt.Errorf("known hosts %s: %w", k.file, err)
	}
	return cb, nil
}

// add appends a host's key to the known_hosts file.
func (k *hostKeys) add(hostname string, remote net.Addr, key ssh.PublicKey) error {
	names := []string{knownhosts.Normalize(hostname)}
	if remote != nil {
		if r := knownhosts.Normalize(remote.String()); r != names[0] {
			names = append(names, r)
		}
	}
	f, err := os.OpenFile(k.file, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, werr := fmt.Fprintln(f, knownhosts.Line(names, key))
	return errors.Join(werr, f.Close())
}

func keyFileType(t string) string {
	switch {
	case strings.Contains(t, "ed25519"):
		return "ed25519"
	case strings.Contains(t, "ecdsa"):
		return "ecdsa"
	}
	return "rsa"
}

// auth is the authentication methods of a host: its key file, then the agent.
func auth(h *Host) ([]ssh.AuthMethod, func(), error) {
	var methods []ssh.AuthMethod
	closeFn := func() {}
	if h.KeyFile != "" {
		b, err := os.ReadFile(h.KeyFile)
		if err != nil {
			return nil, closeFn, fmt.Errorf("%s.ssh.keyFile: %w", h.Field, err)
		}
		signer, err := ssh.ParsePrivateKey(b)
		if err != nil {
			var pe *ssh.PassphraseMissingError
			if errors.As(err, &pe) {
				return nil, closeFn, fmt.Errorf("%s.ssh.keyFile %s is encrypted: load it into an SSH agent and set agent: true", h.Field, h.KeyFile)
			}
			return nil, closeFn, fmt.Errorf("%s.ssh.keyFile %s: %w", h.Field, h.KeyFile, err)
		}
		methods = append(methods, ssh.PublicKeys(signer))
	}
	if h.key != nil {
		signer, err := ssh.ParsePrivateKey(h.key)
		if err != nil {
			return nil, closeFn, fmt.Errorf("%s.ssh.keySecretRef (Secret %s/%s, key %s): %w", h.Field, h.keySecret.Namespace, h.keySecret.Name, h.keySecret.Key, err)
		}
		methods = append(methods, ssh.PublicKeys(signer))
	}
	if h.Agent {
		sock := os.Getenv("SSH_AUTH_SOCK")
		if sock == "" {
			return nil, closeFn, fmt.Errorf("%s.ssh.agent: SSH_AUTH_SOCK is not set: no SSH agent to use", h.Field)
		}
		conn, err := net.Dial("unix", sock)
		if err != nil {
			return nil, closeFn, fmt.Errorf("%s.ssh.agent: %w", h.Field, err)
		}
		closeFn = func() { _ = conn.Close() }
		methods = append(methods, ssh.PublicKeysCallback(agent.NewClient(conn).Signers))
	}
	return methods, closeFn, nil
}

// client is an SSH connection to one host.
type client struct {
	host  *Host
	ssh   *ssh.Client
	close []func()
}

// label names a host in messages: node and address.
func label(h *Host) string { return fmt.Sprintf("host %s (%s, %s)", h.Address, h.Node, h.Field) }

// dial connects to h (through its jump host, when it has one).
func dial(ctx context.Context, h *Host, keys *hostKeys) (*client, error) {
	methods, closeAgent, err := auth(h)
	if err != nil {
		return nil, err
	}
	c := &client{host: h, close: []func(){closeAgent}}
	// The host key's refusal as the callback said it (the handshake's error
	// only wraps it).
	var keyErr error
	cfg := func(user, what string) *ssh.ClientConfig {
		check := keys.callback(what)
		return &ssh.ClientConfig{User: user, Auth: methods, Timeout: h.connectTimeout(),
			HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
				err := check(hostname, remote, key)
				if errors.Is(err, ErrHostKey) {
					keyErr = err
				}
				return err
			}}
	}
	d := net.Dialer{Timeout: h.connectTimeout()}
	var conn net.Conn
	if h.Jump != nil {
		jaddr := net.JoinHostPort(h.Jump.Address, strconv.Itoa(h.Jump.Port))
		jconn, err := d.DialContext(ctx, "tcp", jaddr)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: jump host %s: %w", label(h), jaddr, err)
		}
		jc, err := handshake(ctx, jconn, jaddr, cfg(h.Jump.User, "jump host "+jaddr))
		if err != nil {
			c.Close()
			if keyErr != nil {
				return nil, fmt.Errorf("%s: %w", label(h), keyErr)
			}
			return nil, fmt.Errorf("%s: jump host %s: %w", label(h), jaddr, err)
		}
		c.close = append(c.close, func() { _ = jc.Close() })
		if conn, err = jc.DialContext(ctx, "tcp", h.Addr()); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: through jump host %s: %w", label(h), jaddr, err)
		}
	} else if conn, err = d.DialContext(ctx, "tcp", h.Addr()); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", label(h), err)
	}
	sc, err := handshake(ctx, conn, h.Addr(), cfg(h.User, label(h)))
	if err != nil {
		c.Close()
		if keyErr != nil {
			return nil, keyErr
		}
		return nil, fmt.Errorf("%s: ssh as %s: %w", label(h), h.User, err)
	}
	c.ssh = sc
	return c, nil
}

// handshake runs the SSH handshake on conn, bounded by the config's timeout
// and ctx.
func handshake(ctx context.Context, conn net.Conn, addr string, cfg *ssh.ClientConfig) (*ssh.Client, error) {
	_ = conn.SetDeadline(time.Now().Add(cfg.Timeout))
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	cc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return ssh.NewClient(cc, chans, reqs), nil
}

// Close closes the connection (and the jump host's, and the agent's).
func (c *client) Close() {
	if c.ssh != nil {
		_ = c.ssh.Close()
	}
	for i := len(c.close) - 1; i >= 0; i-- {
		c.close[i]()
	}
}

// run runs a shell command line on the host, as root (through sudo -n unless
// the user is root), with stdin, and returns its stdout. A non-zero exit is an
// error naming the host, what, and the end of stderr. The command ends with
// ctx (the session is closed).
func (c *client) run(ctx context.Context, what, script string, stdin io.Reader) (string, error) {
	return c.exec(ctx, what, script, stdin, true)
}

// exec is run, as root (through sudo unless the user is root) or as the
// user. Content is streamed only to commands run as the user (see upload).
func (c *client) exec(ctx context.Context, what, script string, stdin io.Reader, root bool) (string, error) {
	s, err := c.ssh.NewSession()
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", label(c.host), what, err)
	}
	defer func() { _ = s.Close() }()
	var stdout, stderr bytes.Buffer
	s.Stdout, s.Stderr = &stdout, &stderr
	if stdin != nil {
		s.Stdin = stdin
	} else {
		// A stdin kept open until the command ended. (Added while a hang of
		// sudo was blamed on its stdin's EOF; the hang was sudo looking up
		// the host's own name without DNS. Harmless, kept as tested.)
		w, err := s.StdinPipe()
		if err != nil {
			return "", fmt.Errorf("%s: %s: %w", label(c.host), what, err)
		}
		defer func() { _ = w.Close() }()
	}
	cmd := "sh -c " + shellQuote(script)
	if root && c.host.User != "root" {
		cmd = "sudo -n " + cmd
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(cmd) }()
	stepTimeout := c.host.commandTimeout()
	step := time.NewTimer(stepTimeout)
	defer step.Stop()
	select {
	case err = <-done:
	case <-step.C:
		_ = s.Signal(ssh.SIGKILL)
		_ = s.Close()
		return "", fmt.Errorf("%s: %s: no answer within %s (a slow or hung host)", label(c.host), what, stepTimeout)
	case <-ctx.Done():
		_ = s.Signal(ssh.SIGKILL)
		_ = s.Close()
		return "", fmt.Errorf("%s: %s: %w", label(c.host), what, context.Cause(ctx))
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = "…" + msg[len(msg)-2000:]
		}
		if strings.Contains(msg, "sudo: a password is required") || strings.Contains(msg, "sudo: a terminal is required") {
			return "", fmt.Errorf("%s: %s: user %s needs a password for sudo; kubeplug needs root: log in as root or allow the user sudo without a password (NOPASSWD)", label(c.host), what, c.host.User)
		}
		return stdout.String(), fmt.Errorf("%s: %s: %w: %s", label(c.host), what, err, msg)
	}
	return stdout.String(), nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
