// Package buildversion is kubeplug's own version: the one stamped at link time,
// else the module version of a `go install`, else "dev". It imports only the
// runtime, so that the CLI's lean start (cmd/kubeplug/internal/leanstart) can
// print `kubeplug version` before any heavy package initialises.
package buildversion

import (
	"runtime"
	"runtime/debug"
)

// Version is set at link time
// (-ldflags "-X github.com/kubeplug/kubeplug/internal/buildversion.Version=v0.1.0").
var Version = ""

// String returns kubeplug's version.
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// Line is `kubeplug version`'s text output, for the given API group version.
func Line(apiVersion string) string {
	return "kubeplug " + String() + " (" + apiVersion + ", " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
}
