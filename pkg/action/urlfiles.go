package action

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/expansion"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// Node files from a URL. A plugin's node file may name a URL and the SHA-256 of
// what it serves (nodes[].files[].url, sha256) instead of holding its bytes: a
// binary past the package size limit. After each stage, fetchURLFiles fetches
// every such file the model names that the run has not fetched yet into the
// digest-addressed cache (source.URLFiles: bounded in size and time, the digest
// checked), and render places the bytes on the machines (renderInput.URLFile).

// fetchURLFiles fetches the model's downloaded node files.
func (r *run) fetchURLFiles(ctx context.Context) diag.List {
	var l diag.List
	if r.model == nil {
		return l
	}
	var u *source.URLFiles
	for _, pn := range r.model.PoolNames() {
		p := r.model.Pools[pn]
		paths := make([]string, 0, len(p.Files))
		for fp := range p.Files {
			paths = append(paths, fp)
		}
		slices.Sort(paths)
		for _, fp := range paths {
			f := p.Files[fp]
			if f.URL == "" || r.urlFiles[f.SHA256] != nil {
				continue
			}
			b, found, err := r.expansionURLFile(f.SHA256)
			if !found && err == nil {
				if u == nil {
					u = source.DefaultURLFiles()
				}
				b, err = u.Get(ctx, f.URL, f.SHA256)
			}
			if err != nil {
				l = append(l, diag.Diagnostic{Severity: diag.Fatal, Plugin: f.By, Field: "nodes." + pn + ".files." + fp + ".url", Message: err.Error()})
				continue
			}
			if r.urlFiles == nil {
				r.urlFiles = map[string][]byte{}
			}
			r.urlFiles[f.SHA256] = b
		}
	}
	return l
}

// expansionURLFile returns the node file whose hex SHA-256 is sum from the
// run's expansions, when one carries it: an air-gapped site renders without
// the network. Its bytes are checked again as they are read.
func (r *run) expansionURLFile(sum string) ([]byte, bool, error) {
	if r.exp == nil {
		return nil, false, nil
	}
	file, e, ok := r.exp.set.URLFile(sum)
	if !ok {
		return nil, false, nil
	}
	b, err := bounded.ReadFile(file, source.MaxURLFileSize)
	if err != nil {
		return nil, true, fmt.Errorf("expansion %s: %w", e.Name(), err)
	}
	if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
		return nil, true, fmt.Errorf("expansion %s: %s holds bytes with sha256 %s, not the sha256 %s its name pins: the file changed after the expansion was verified", e.Name(), expansion.URLFilePath(sum), hex.EncodeToString(got[:]), sum)
	}
	return b, true, nil
}

// urlFile is render's Input.URLFile: the bytes fetchURLFiles fetched.
func (r *run) urlFile(url, sha256 string) ([]byte, error) {
	if b, ok := r.urlFiles[sha256]; ok {
		return b, nil
	}
	return nil, &urlNotFetchedError{url: url}
}

type urlNotFetchedError struct{ url string }

func (e *urlNotFetchedError) Error() string { return e.url + ": not fetched" }
