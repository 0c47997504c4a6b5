package faultpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// EnvVar names the point (name or name:N) at which Hit kills the process.
const EnvVar = "KUBEPLUG_FAULTPOINT"

var target = sync.OnceValues(func() (string, int64) {
	return parse(os.Getenv(EnvVar))
})

// hits counts how often the target point was reached.
var hits atomic.Int64

// parse splits "name" or "name:N" into the name and the hit that kills (1 for
// a bare name). A malformed count is part of the name, so it never matches a
// point and never kills.
func parse(v string) (string, int64) {
	if v == "" {
		return "", 0
	}
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		if n, err := strconv.ParseInt(v[i+1:], 10, 64); err == nil && n > 0 {
			return v[:i], n
		}
	}
	return v, 1
}

// Hit marks the point name. It kills the process with SIGKILL when
// KUBEPLUG_FAULTPOINT names this point and this is the hit it counts to; it
// returns at once otherwise. Safe for concurrent use: with name:N exactly one
// caller, the N-th, kills.
func Hit(name string) {
	t, n := target()
	if t == "" || t != name {
		return
	}
	if hits.Add(1) != n {
		return
	}
	kill()
}

// kill is a variable so that tests of this package can watch it instead of dying.
var kill = func() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	// SIGKILL cannot be caught; wait for it rather than run on past the point.
	select {}
}

// Enabled reports whether a fault point is set, for code that arranges extra
// points (wrapping a client) only then.
func Enabled() bool {
	t, _ := target()
	return t != ""
}
