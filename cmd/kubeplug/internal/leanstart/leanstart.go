// Package leanstart answers `kubeplug --help`, `kubeplug -h`, `kubeplug help`
// and `kubeplug version` before the heavy packages the other verbs need
// (client-go's schemes, Helm, controller-runtime, the JSON Schema compiler, the
// AWS SDK) run their package initialisation: that work is most of the CLI's
// start, and these four answers need none of it (issue 42).
//
// Go initialises every linked package before main, but in a defined order:
// repeatedly the first package, by import path, whose imports are all
// initialised. This package imports only os, embed and buildversion (which
// imports only the runtime), so it initialises among the first; its init prints
// the answer and exits. Any other command line, or one whose help would differ from the
// snapshot (KUBEPLUG_CONTRIB_DIR set, which shows as --contrib-dir's default),
// falls through to the whole CLI, and so does version in a build without a
// stamped version (see buildversion). cmd/kubeplug's tests hold the answers equal
// to the whole CLI's and the list of packages this path must not initialise.
package leanstart

import (
	_ "embed" // the help snapshot
	"os"

	"github.com/kubeplug/kubeplug/internal/buildversion"
)

// HelpFile is the snapshot of the whole CLI's `kubeplug --help`, beside this
// file; cmd/kubeplug's TestLeanStartAnswersAsTheWholeCLI rewrites it with -update.
const HelpFile = "help.txt"

//go:embed help.txt
var help string

// APIVersion is api/v1alpha1.GroupVersion, which `version` prints (importing
// the API package would initialise apimachinery first); a test holds them equal.
const APIVersion = "kubeplug.dev/v1alpha1"

func init() {
	if out, ok := Answer(os.Args[1:], os.LookupEnv); ok {
		_, err := os.Stdout.WriteString(out)
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// Answer is what kubeplug prints for args when it can answer without the
// whole CLI, and whether it can.
func Answer(args []string, lookupEnv func(string) (string, bool)) (string, bool) {
	if len(args) != 1 {
		return "", false
	}
	switch args[0] {
	case "version":
		if buildversion.Version == "" {
			return "", false // the whole CLI reads the module version from the build info
		}
		return buildversion.Line(buildversion.Version, APIVersion), true
	case "--help", "-h", "help":
		if _, set := lookupEnv("KUBEPLUG_CONTRIB_DIR"); set || help == "" {
			return "", false
		}
		return help, true
	}
	return "", false
}
