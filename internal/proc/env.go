package proc

import "os"

// Env returns a plugin process's environment: only PATH, HOME, TMPDIR and the
// locale from the host, so that credentials in the host's environment do not leak
// into plugins, followed by extra.
func Env(extra ...string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}
