package redact

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Mask replaces a sensitive value in text.
const Mask = "***"

// MinLen is the shortest value scrubbed from free text, in bytes.
const MinLen = 4

// Secrets is a set of sensitive values. The zero value and a nil *Secrets are
// empty sets; all methods are safe for concurrent use.
type Secrets struct {
	mu   sync.RWMutex
	vals []string
	r    *strings.Replacer
}

// New returns a set holding vals.
func New(vals ...string) *Secrets {
	s := &Secrets{}
	s.Add(vals...)
	return s
}

// Add adds values to the set; values shorter than MinLen are ignored.
func (s *Secrets) Add(vals ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, v := range vals {
		if len(v) < MinLen || slices.Contains(s.vals, v) {
			continue
		}
		s.vals = append(s.vals, v)
		changed = true
	}
	if changed {
		s.r = replacer(s.vals)
	}
}

// Values returns the values in the set, sorted.
func (s *Secrets) Values() []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := slices.Clone(s.vals)
	slices.Sort(out)
	return out
}

// Len returns how many values the set holds.
func (s *Secrets) Len() int {
	if s == nil {
		return 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.vals)
}

// Without returns a new set of the values of s that are not in own: what a plugin
// must not see of the others' values when own are its own.
func (s *Secrets) Without(own *Secrets) *Secrets {
	out := &Secrets{}
	keep := own.Values()
	for _, v := range s.Values() {
		if !slices.Contains(keep, v) {
			out.Add(v)
		}
	}
	return out
}

// String returns text with every value of the set, and its base64 and JSON-quoted
// forms, replaced by Mask.
func (s *Secrets) String(text string) string {
	if s == nil {
		return text
	}
	s.mu.RLock()
	r := s.r
	s.mu.RUnlock()
	if r == nil {
		return text
	}
	return r.Replace(text)
}

// Error returns err with its text scrubbed, or err itself when nothing in it is
// sensitive (so errors.Is keeps working in the common case). A scrubbed error
// still unwraps to err.
func (s *Secrets) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := s.String(msg); clean != msg {
		return &scrubbed{msg: clean, err: err}
	}
	return err
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// JSON returns a copy of v, a value that survives a JSON round trip (a model, a
// cluster spec), with every sensitive value inside any string masked. It returns v
// itself when the set is empty or nothing in v is sensitive.
func JSON[T any](s *Secrets, v *T) (*T, error) {
	if s.Len() == 0 || v == nil {
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode for redaction: %w", err)
	}
	clean := s.String(string(b))
	if clean == string(b) {
		return v, nil
	}
	out := new(T)
	if err := json.Unmarshal([]byte(clean), out); err != nil {
		return nil, fmt.Errorf("decode after redaction: %w", err)
	}
	return out, nil
}

// forms returns the ways a value is commonly written out: as is, JSON-quoted, and
// in the four base64 alphabets (a Kubernetes Secret's data, a basic-auth header).
func forms(v string) []string {
	out := []string{v}
	if q, err := json.Marshal(v); err == nil {
		out = append(out, string(q[1:len(q)-1]))
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		out = append(out, enc.EncodeToString([]byte(v)))
	}
	return out
}

// Forms returns every form of every value of the set (as is, JSON-quoted, base64)
// that is at least MinLen long, longest first, so that a replacement of each in
// this order covers a value that contains another whole.
func (s *Secrets) Forms() []string {
	return allForms(s.Values())
}

func allForms(vals []string) []string {
	var all []string
	for _, v := range vals {
		for _, f := range forms(v) {
			if len(f) >= MinLen && !slices.Contains(all, f) {
				all = append(all, f)
			}
		}
	}
	slices.SortFunc(all, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return all
}

// replacer masks every form of every value, longest first.
func replacer(vals []string) *strings.Replacer {
	all := allForms(vals)
	pairs := make([]string, 0, 2*len(all))
	for _, f := range all {
		pairs = append(pairs, f, Mask)
	}
	return strings.NewReplacer(pairs...)
}

type ctxKey struct{}

// NewContext returns ctx carrying s, for the runtimes and checks that run code
// under ctx.
func NewContext(ctx context.Context, s *Secrets) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// FromContext returns the set ctx carries, or nil (an empty set).
func FromContext(ctx context.Context) *Secrets {
	s, _ := ctx.Value(ctxKey{}).(*Secrets)
	return s
}
