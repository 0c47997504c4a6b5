package controlplane

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/provider/internal/kubebin"
)

const (
	// BinDirEnv names the environment variable that points at a directory with
	// the localcluster binaries; it wins over the default build path.
	BinDirEnv = kubebin.BinDirEnv

	// mainModule is how the repository root is recognised.
	mainModule = "github.com/kubeplug/kubeplug"

	// defaultBinDir is the build output of `make localcluster`, relative to the
	// repository root.
	defaultBinDir = "_output/localcluster/bin"
)

// requiredBinaries are the names that must be in the binary directory. kubectl
// is built too but the control plane does not run it.
var requiredBinaries = []Component{Etcd, APIServer, ControllerManager, Scheduler, Kwok}

// FindBinDir returns the directory holding the localcluster binaries: explicit if
// not empty, else $KUBEPLUG_LOCALCLUSTER_BIN, else the default build path under
// the repository root. It checks that every component is there and executable;
// the error wraps ErrBinariesNotFound and says how to build them.
func FindBinDir(explicit string) (string, error) {
	dir, origin := explicit, "Options.BinDir"
	if dir == "" {
		dir, origin = os.Getenv(BinDirEnv), "$"+BinDirEnv
	}
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", fmt.Errorf("%w: %s is not set and %w; run `make localcluster` in the kubeplug repository or set %s",
				ErrBinariesNotFound, BinDirEnv, err, BinDirEnv)
		}
		dir, origin = filepath.Join(root, defaultBinDir), "the default build path"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve binary directory %q: %w", dir, err)
	}
	for _, c := range requiredBinaries {
		p := filepath.Join(abs, string(c))
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("%w: %s missing in %s (from %s); run `make localcluster` in the kubeplug repository or set %s",
				ErrBinariesNotFound, c, abs, origin, BinDirEnv)
		}
	}
	return abs, nil
}

// BuildDir returns <repository root>/_output/<target>/bin, where `make <target>`
// builds a version of the local control plane from Go modules. It does not
// check what is there (FindBinDir does).
func BuildDir(target string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBinariesNotFound, err)
	}
	return filepath.Join(root, "_output", target, "bin"), nil
}

// repoRoot walks up from the working directory, then from this source file's
// directory, to the go.mod that declares the kubeplug module. The second start
// point lets tools that run with another working directory still find it.
func repoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, start := range starts {
		for dir := start; ; {
			if isMainModule(filepath.Join(dir, "go.mod")) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("no go.mod declaring module %s above %s", mainModule, strings.Join(starts, " or "))
}

func isMainModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == mainModule
		}
	}
	return false
}
