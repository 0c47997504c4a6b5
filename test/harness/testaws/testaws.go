// Package testaws runs an AWS emulator for tests: moto's server mode on a port
// of 127.0.0.1 reserved for it (internal/portblock, as a local cluster's), through tools/moto/kubeplug_moto.py (moto_server with one
// correction, see there). `make moto` (a prerequisite of `make unit`) installs
// moto, pinned by tools/moto/requirements.txt, into a virtualenv under
// _output/moto-venv; $KUBEPLUG_MOTO_SERVER names another server command, run
// with -H 127.0.0.1 -p PORT. When it is missing a test is skipped with a note saying how to
// install it — but with CI=true it fails, since CI must run every test.
package testaws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/internal/portblock"
)

// ServerEnv names a moto_server to use instead of the one `make moto` installs.
const ServerEnv = "KUBEPLUG_MOTO_SERVER"

// Region is the region tests use.
const Region = "us-east-1"

// ServerCommand returns the command that runs the emulator: $KUBEPLUG_MOTO_SERVER,
// else _output/moto-venv/bin/python with tools/moto/kubeplug_moto.py of the
// module this test runs in.
func ServerCommand() ([]string, error) {
	if p := os.Getenv(ServerEnv); p != "" {
		return []string{p}, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "localcluster")); err == nil {
				venv := filepath.Join(dir, "_output", "moto-venv")
				if _, err := os.Stat(filepath.Join(venv, ".installed")); err != nil {
					return nil, fmt.Errorf("moto is not installed in %s: run `make moto` (or set $%s)", venv, ServerEnv)
				}
				return []string{filepath.Join(venv, "bin", "python"), filepath.Join(dir, "tools", "moto", "kubeplug_moto.py")}, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("no kubeplug module above the working directory to find _output/moto-venv in: set $%s", ServerEnv)
		}
		dir = parent
	}
}

// Server is a running moto server.
type Server struct {
	// Endpoint is its URL, http://127.0.0.1:PORT.
	Endpoint string
	addr     string
	block    *portblock.Block
	owner    string // the temporary directory the port block is reserved for
	cmd      *exec.Cmd
	done     chan struct{}
	mu       sync.Mutex
	out      bytes.Buffer
}

// Start starts a moto server for tb and stops it when tb ends, failing tb if it
// does not stop. A missing moto_server skips tb, or fails it when CI=true.
func Start(tb testing.TB) *Server {
	tb.Helper()
	command, err := ServerCommand()
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("the AWS emulator is required in CI: %v", err)
		}
		tb.Skipf("the AWS emulator is missing: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := StartCommand(ctx, command)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// StartCommand starts the emulator command on a loopback port of a port block
// of its own and waits until it answers. moto takes a second or two to bind;
// a port chosen by the kernel could be another process' by then.
func StartCommand(ctx context.Context, command []string) (*Server, error) {
	owner, err := os.MkdirTemp("", "kubeplug-moto-")
	if err != nil {
		return nil, err
	}
	block, err := portblock.Acquire(owner, nil, 1, nil)
	if err != nil {
		_ = os.RemoveAll(owner)
		return nil, fmt.Errorf("reserve a port for the emulator: %w", err)
	}
	port := block.Ports()[0]
	block.Hand(port)
	s := &Server{addr: "127.0.0.1:" + strconv.Itoa(port), block: block, owner: owner, done: make(chan struct{})}
	s.Endpoint = "http://" + s.addr
	s.cmd = exec.Command(command[0], append(command[1:], "-H", "127.0.0.1", "-p", strconv.Itoa(port))...) //nolint:gosec // the test's own emulator
	s.cmd.Stdout, s.cmd.Stderr = (*lockedWriter)(s), (*lockedWriter)(s)
	// Its own process group, so that Stop ends whatever it started.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		s.releasePort()
		return nil, fmt.Errorf("start the emulator: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	for {
		// Any HTTP answer means it serves.
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			return s, nil
		}
		select {
		case <-s.done:
			s.releasePort()
			return nil, fmt.Errorf("moto_server exited before it served: %s", s.output())
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("moto_server did not answer on %s: %w: %s", s.addr, ctx.Err(), s.output()), s.Stop())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type lockedWriter Server

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.out.Len() < 1<<20 {
		w.out.Write(p)
	}
	return len(p), nil
}

func (s *Server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// Reset forgets everything the emulator holds (every service's state).
func (s *Server) Reset(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint+"/moto-api/reset", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reset the emulator: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reset the emulator: %s", resp.Status)
	}
	return nil
}

// Stop ends the server's process group (SIGTERM, then SIGKILL after 5s) and
// checks that the process exited and its port is closed.
func (s *Server) Stop() error {
	defer s.releasePort()
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			return fmt.Errorf("moto_server (pid %d) did not exit", pgid)
		}
	}
	if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
		_ = c.Close()
		return fmt.Errorf("moto_server stopped but %s still accepts connections", s.addr)
	}
	return nil
}

// releasePort gives up the emulator's port block.
func (s *Server) releasePort() {
	s.block.Release()
	_ = os.RemoveAll(s.owner)
}

// Env sets, for tb, the environment under which the AWS SDK's standard chain
// finds the emulator's (any) credentials and the region, and reads nothing of
// the machine's own AWS configuration.
func Env(tb testing.TB) {
	tb.Helper()
	dir := tb.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":           "testing",
		"AWS_SECRET_ACCESS_KEY":       "testing",
		"AWS_SESSION_TOKEN":           "",
		"AWS_REGION":                  Region,
		"AWS_PROFILE":                 "",
		"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		tb.Setenv(k, v)
	}
}
