package proc

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"

	"github.com/kubeplug/kubeplug/internal/redact"
)

// Tail limits: how much of a plugin's stderr is kept for error messages.
const (
	tailLines = 20
	tailBytes = 4 << 10
	// maxLine bounds one logged line; longer lines are split.
	maxLine = 16 << 10
)

// Stderr is an io.Writer for a plugin's stderr. It logs every line with the
// plugin's name and keeps the last lines for error messages. It is safe for
// concurrent use.
type Stderr struct {
	log    *slog.Logger
	attrs  []any
	mu     sync.Mutex
	buf    []byte
	tail   []string
	nbytes int
	// secrets are masked in every line before it is logged or kept.
	secrets *redact.Secrets
	// panic is the first line of a Go panic or fatal error, kept even when the
	// stack trace that follows pushes it out of the tail: it says the most.
	panic string
}

// NewStderr returns a writer that logs lines to log with plugin=name and attrs.
func NewStderr(log *slog.Logger, name string, attrs ...any) *Stderr {
	return &Stderr{log: log, attrs: append([]any{"plugin", name}, attrs...)}
}

// Scrub makes the writer mask every value of secrets (see package redact) in the
// lines it logs and keeps, from now on. It returns s.
func (s *Stderr) Scrub(secrets *redact.Secrets) *Stderr {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets = secrets
	return s
}

// Write logs every complete line in p and buffers the rest.
func (s *Stderr) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			if len(s.buf) >= maxLine {
				s.line(string(s.buf))
				s.buf = s.buf[:0]
			}
			return len(p), nil
		}
		s.line(string(s.buf[:i]))
		s.buf = s.buf[i+1:]
	}
}

// Flush logs a final line that had no newline.
func (s *Stderr) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) > 0 {
		s.line(string(s.buf))
		s.buf = nil
	}
}

func (s *Stderr) line(l string) {
	l = s.secrets.String(strings.TrimRight(l, "\r"))
	if s.panic == "" && (strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ")) {
		s.panic = l
	}
	s.log.Info("plugin stderr", append(s.attrs, "line", l)...)
	s.tail = append(s.tail, l)
	s.nbytes += len(l) + 1
	for len(s.tail) > tailLines || (s.nbytes > tailBytes && len(s.tail) > 1) {
		s.nbytes -= len(s.tail[0]) + 1
		s.tail = s.tail[1:]
	}
}

// Tail returns the last lines written (at most 20 lines and about 4 KiB), flushing
// a partial last line first.
func (s *Stderr) Tail() string {
	s.Flush()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := strings.Join(s.tail, "\n")
	if len(t) > tailBytes {
		t = "..." + t[len(t)-tailBytes:]
	}
	if s.panic != "" && !strings.Contains(t, s.panic) {
		t = s.panic + "\n...\n" + t
	}
	return t
}

// Reset forgets the tail, for a runtime that reuses one writer across calls.
func (s *Stderr) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf, s.tail, s.nbytes, s.panic = nil, nil, 0, ""
}

// WithTail appends the stderr tail, indented, to msg; msg alone when there is none.
func WithTail(msg, tail string) string {
	if tail == "" {
		return msg
	}
	return msg + "; stderr:\n    " + strings.ReplaceAll(tail, "\n", "\n    ")
}
