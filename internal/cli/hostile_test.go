package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestPasswordStdinIsBounded gives /dev/zero as standard input to every
// --password-stdin: each is an error naming the flag and the limit, within
// seconds, never an out-of-memory.
func TestPasswordStdinIsBounded(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"keygen", []string{"plugin", "keygen", "--password-stdin", "--output-key-prefix", dir + "/k"}, "--password-stdin: reading the password from standard input: file is larger than the 64 KiB limit"},
		{"sign", []string{"plugin", "sign", "--password-stdin", "--key", dir + "/none.key", dir + "/none.tgz"}, "--password-stdin: reading the password from standard input: file is larger than the 64 KiB limit"},
		{"registry", []string{"plugin", "push", "--username", "u", "--password-stdin", dir + "/none.tgz", "oci://127.0.0.1:1/p"}, "--password-stdin: cannot read the password from stdin: file is larger than the 64 KiB limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zero, err := os.Open("/dev/zero")
			if err != nil {
				t.Skip(err)
			}
			defer func() { _ = zero.Close() }()
			var out, errb bytes.Buffer
			start := time.Now()
			code := run(context.Background(), tc.args, Streams{In: zero, Out: &out, Err: &errb}, func(string) (string, bool) { return "", false })
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %s", took)
			}
			if code == 0 || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want an error saying %q", code, errb.String(), tc.want)
			}
		})
	}
}
