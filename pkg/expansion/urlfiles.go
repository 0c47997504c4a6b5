package expansion

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// Node files from a URL (a plugin's nodes[].files[].url, pinned by sha256)
// travel in an expansion by their digest, as the image layout's blobs do:
// urlfiles/sha256/HEX holds the bytes whose SHA-256 is HEX. `expansion
// create -f cluster.yaml` packs every such file the cluster's render fetched;
// a run with the expansion takes them from it instead of the network. The
// name is the pin: a file whose bytes hash to another digest is refused when
// the package is read, whatever checksums.txt says (it travels with the
// package and may have been rewritten to match).

// URLFilesDir is where a package keeps node files downloaded from a URL.
const URLFilesDir = "urlfiles"

// URLFilePath is where a package keeps the node file whose hex SHA-256 is sum.
func URLFilePath(sum string) string { return path.Join(URLFilesDir, "sha256", sum) }

// checkURLFiles refuses a URL file whose name is no digest, or whose bytes
// hash to another one.
func (p *Package) checkURLFiles(l *diag.List) {
	for _, name := range sortedKeys(p.Files) {
		rest, ok := strings.CutPrefix(name, URLFilesDir+"/")
		if !ok {
			continue
		}
		sum, ok := strings.CutPrefix(rest, "sha256/")
		if !ok || !sha256Hex.MatchString(sum) {
			l.Errorf(p.where(name), 0, 0, "", "expected a node file named by its digest, %s, found %s", URLFilePath("HEX"), name)
			continue
		}
		if got := strings.TrimPrefix(p.Files[name].Digest, "sha256:"); got != sum {
			l.Errorf(p.where(name), 0, 0, "", "expansion %s: %s holds bytes with sha256 %s, not the sha256 its name pins: the package was changed after it was packed", p.Name(), name, got)
		}
	}
}

// writeURLFiles stages files (bytes by hex SHA-256) under URLFilesDir.
func writeURLFiles(stage string, files map[string][]byte) error {
	for _, sum := range sortedKeys(files) {
		if !sha256Hex.MatchString(sum) {
			return fmt.Errorf("node file: %q is not a hex sha256", sum)
		}
		if got := digestHex(files[sum]); got != sum {
			return fmt.Errorf("node file %s: its bytes hash to sha256 %s", sum, got)
		}
		p := filepath.Join(stage, filepath.FromSlash(URLFilePath(sum)))
		if _, err := os.Stat(p); err == nil {
			continue // the source holds it (a hard link: never written through)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[sum], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// URLFile returns where an expansion of s keeps the node file whose hex
// SHA-256 is sum (its bytes were checked against sum when it was read), and
// the expansion; ok is false when none carries it.
func (s *Set) URLFile(sum string) (file string, e *Loaded, ok bool) {
	if s == nil {
		return "", nil, false
	}
	for _, e := range s.Expansions {
		f, found := e.Files[URLFilePath(sum)]
		if found && f.Digest == "sha256:"+sum {
			return filepath.Join(e.Root, filepath.FromSlash(URLFilePath(sum))), e, true
		}
	}
	return "", nil, false
}

func digestHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
