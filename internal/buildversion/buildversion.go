// Package buildversion is the version stamped into kubeplug at link time and the
// line `kubeplug version` prints. It imports only the runtime, so that the CLI's
// lean start (cmd/kubeplug/internal/leanstart) can print it before the heavy
// packages initialise: Go initialises, of the packages ready, the lexically first,
// so even an empty import such as runtime/debug would hold the lean start back
// behind every ready package sorting before "runtime/debug". A build without the
// stamp reads its module version from the build info instead (pkg/cmd).
package buildversion

import "runtime"

// Version is set at link time (make build does:
// -ldflags "-X github.com/kubeplug/kubeplug/internal/buildversion.Version=v0.1.0").
var Version = ""

// Line is `kubeplug version`'s text output for kubeplug version v and the given
// API group version.
func Line(v, apiVersion string) string {
	return "kubeplug " + v + " (" + apiVersion + ", " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
}
