package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Env returns a plugin process's environment: only PATH, HOME, TMPDIR and the
// locale from the host, so that credentials in the host's environment do not leak
// into plugins, followed by extra. A name extra sets (TMPDIR, to a private
// directory) is not taken from the host.
func Env(extra ...string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL"} {
		if slices.ContainsFunc(extra, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// PrivateTemp creates an empty directory, readable by the owner only, under
// dir (a call's private directory, which the caller removes with everything in
// it): the TMPDIR of one plugin call, so that a plugin's temporary files are
// neither shared with other plugins nor left behind.
func PrivateTemp(dir string) (string, error) {
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return "", fmt.Errorf("create the private temporary directory: %w", err)
	}
	return tmp, nil
}
