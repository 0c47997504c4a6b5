package seal_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/internal/redact"
	"github.com/kubeplug/kubeplug/pkg/deploy/seal"
)

// memKeys is a key source in memory that counts its reads.
type memKeys struct {
	key   []byte
	reads int
}

func (m *memKeys) get(_ context.Context, create bool) ([]byte, error) {
	m.reads++
	if m.key == nil {
		if !create {
			return nil, seal.ErrNoKey
		}
		m.key = bytes.Repeat([]byte{7}, 32)
	}
	return m.key, nil
}

func TestSealAndUnseal(t *testing.T) {
	const pw = "correct horse battery"
	b64 := base64.StdEncoding.EncodeToString([]byte(pw))
	text := []byte(`{"stringData":{"a":"` + pw + `"},"data":{"b":"` + b64 + `"},"other":"kept"}`)
	tests := []struct {
		name      string
		sensitive []string
		text      []byte
		wantSame  bool
		wantReads int
	}{
		{"nothing sensitive: as is, no key", nil, text, true, 0},
		{"a value elsewhere: as is, no key", []string{"not in the text"}, text, true, 0},
		{"every form sealed", []string{pw}, text, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := &memKeys{}
			s := seal.New(keys.get, redact.New(tt.sensitive...), "the test key")
			got, err := s.Seal(t.Context(), tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if same := bytes.Equal(got, tt.text); same != tt.wantSame {
				t.Fatalf("sealed = %s", got)
			}
			if keys.reads != tt.wantReads {
				t.Errorf("key read %d times, want %d", keys.reads, tt.wantReads)
			}
			if tt.wantSame {
				return
			}
			if bytes.Contains(got, []byte(pw)) || bytes.Contains(got, []byte(b64)) || !bytes.Contains(got, []byte(`"other":"kept"`)) {
				t.Fatalf("sealed = %s", got)
			}
			again, _ := s.Seal(t.Context(), tt.text)
			if !bytes.Equal(again, got) {
				t.Error("sealing the same text twice gives different bytes")
			}
			// A reader that knows no values opens it and learns them.
			r := seal.New(keys.get, nil, "the test key")
			back, err := r.Unseal(t.Context(), got)
			if err != nil || !bytes.Equal(back, tt.text) {
				t.Fatalf("unsealed = %s, %v", back, err)
			}
			if resealed, _ := r.Seal(t.Context(), back); !bytes.Equal(resealed, got) {
				t.Errorf("a reader does not seal again what it revealed: %s", resealed)
			}
		})
	}
}

func TestUnsealFailures(t *testing.T) {
	keys := &memKeys{}
	s := seal.New(keys.get, redact.New("hunter2-hunter2"), "Secret ns/key")
	sealed, err := s.Seal(t.Context(), []byte("pw: hunter2-hunter2\n"))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSuffix(strings.TrimPrefix(string(sealed), "pw: "), "\n")
	tampered := []byte("pw: " + tok[:len(tok)-3] + "A" + tok[len(tok)-2:] + "\n")
	tests := []struct {
		name string
		keys seal.Keys
		text []byte
		want string
	}{
		{"tampered", keys.get, tampered, "cannot be opened with the key in Secret ns/key"},
		{"cut short", keys.get, []byte("pw: " + seal.Prefix + "abc"), "cut short"},
		{"not base64", keys.get, []byte("pw: " + seal.Prefix + "!!!."), "malformed"},
		{"other key", (&memKeys{key: bytes.Repeat([]byte{9}, 32)}).get, sealed, "cannot be opened"},
		{"no key", (&memKeys{}).get, sealed, "Secret ns/key is missing"},
		{"key unreadable", func(context.Context, bool) ([]byte, error) { return nil, errors.New("forbidden") }, sealed, "read the sealing key Secret ns/key: forbidden"},
		{"short key", func(context.Context, bool) ([]byte, error) { return []byte("short"), nil }, sealed, "is 5 bytes, not 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := seal.New(tt.keys, nil, "Secret ns/key").Unseal(t.Context(), tt.text)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
