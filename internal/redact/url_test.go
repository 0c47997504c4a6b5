package redact

import (
	"errors"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://user:s3cret@example.com/index.yaml", "https://user:***@example.com/index.yaml"},
		{"http://u:p%40ss@127.0.0.1:8080/x?y=1", "http://u:***@127.0.0.1:8080/x?y=1"},
		{"https://:tok@host/", "https://:***@host/"},
		{"https://user@host/", "https://user@host/"},
		{"https://host/a:b@c", "https://host/a:b@c"},
		{"oci://user:pw@reg.example/p", "oci://user:***@reg.example/p"},
		{"://bad:s3cret@%zz", "://bad:***@%zz"},
	} {
		if got := URL(tc.in); got != tc.want || strings.Contains(got, "s3cret") {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestURLError(t *testing.T) {
	base := errors.New("base")
	err := URLError(errors.Join(errors.New(`GET "https://me:hunter2@h/i": 401`), base))
	if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "https://me:***@h/i") || !errors.Is(err, base) {
		t.Fatalf("URLError = %v", err)
	}
	if clean := errors.New("nothing"); URLError(clean) != clean { //nolint:errorlint // the very error is returned
		t.Fatal("an error without credentials is returned as is")
	}
}
