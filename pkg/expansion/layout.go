package expansion

import (
	"bytes"
	"encoding/json"
	"path"
	"regexp"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/diag"
)

// The image layout is verified by its content addresses, whatever checksums.txt
// says (it travels with the package and may have been rewritten to match): every
// blob under images/blobs/ must hash to its name, and every descriptor index.json
// and the manifests and indexes reachable from it hold must name a blob present,
// of the size it says. These bound the walk.
const (
	// maxLayoutJSON bounds the bytes of the layout's JSON blobs (manifests,
	// indexes, configs) kept in memory to walk their references.
	maxLayoutJSON = 64 << 20
	// maxLayoutRefs bounds the descriptors walked.
	maxLayoutRefs = 200_000
	// maxLayoutErrors bounds the layout problems reported one by one; the rest
	// are counted ("and N more").
	maxLayoutErrors = 20
)

// blobsDir is where an OCI image layout keeps its blobs, by algorithm and hex.
var blobsDir = path.Join(ImagesDir, "blobs") + "/"

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// jsonKeeper keeps what is written to it when it starts with '{' (a manifest,
// an index or a config), up to a shared budget; anything else (a layer) is
// dropped at its first byte, so reading a layer costs no memory.
type jsonKeeper struct {
	buf      []byte
	started  bool
	rejected bool
	// over says the budget ran out while keeping this blob.
	over   bool
	budget *int64
}

func (k *jsonKeeper) Write(b []byte) (int, error) {
	if k.rejected || len(b) == 0 {
		return len(b), nil
	}
	if !k.started {
		k.started = true
		if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
			k.rejected = true
			return len(b), nil
		}
	}
	if *k.budget -= int64(len(b)); *k.budget < 0 {
		k.rejected, k.over, k.buf = true, true, nil
		return len(b), nil
	}
	k.buf = append(k.buf, b...)
	return len(b), nil
}

// descriptor is what the layout check reads of an OCI descriptor.
type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// node is a manifest or an index: the references it holds.
type node struct {
	MediaType string       `json:"mediaType"`
	Manifests []descriptor `json:"manifests"`
	Config    *descriptor  `json:"config"`
	Layers    []descriptor `json:"layers"`
}

func isIndexType(mt string) bool {
	return mt == "application/vnd.oci.image.index.v1+json" || mt == "application/vnd.docker.distribution.manifest.list.v2+json"
}

func isManifestType(mt string) bool {
	return mt == "application/vnd.oci.image.manifest.v1+json" || mt == "application/vnd.docker.distribution.manifest.v2+json"
}

// nonDistributable layers are fetched from elsewhere by design; a layout need
// not hold them.
func nonDistributable(mt string) bool {
	return strings.Contains(mt, "nondistributable") || strings.Contains(mt, "foreign")
}

// checkLayout verifies the image layout by content address (see maxLayoutJSON).
// blobs are the JSON blobs kept while reading, by path; overBudget says some were
// dropped for the budget.
//
// Branches: the OCI image layout's rules in the order the spec gives them (blob
// names, digests, index, manifests, configs, layers), each naming what is wrong,
// with one shared error budget.
func (p *Package) checkLayout(blobs map[string][]byte, overBudget bool, l *diag.List) {
	problems := 0
	errorf := func(where, format string, args ...any) {
		if problems++; problems <= maxLayoutErrors {
			l.Errorf(where, 0, 0, "", format, args...)
		}
	}
	defer func() {
		if problems > maxLayoutErrors {
			l.Errorf(p.where(path.Join(ImagesDir, "index.json")), 0, 0, "", "and %d more problems in the image layout (%d in all; the first %d are shown)", problems-maxLayoutErrors, problems, maxLayoutErrors)
		}
	}()
	// Every blob is named by its content.
	for _, name := range sortedKeys(p.Files) {
		rest, ok := strings.CutPrefix(name, blobsDir)
		if !ok {
			continue
		}
		alg, hex, _ := strings.Cut(rest, "/")
		if alg != "sha256" || !sha256Hex.MatchString(hex) {
			errorf(p.where(name), "not a blob name: an image layout's blobs are %ssha256/ and 64 lower-case hex digits", blobsDir)
			continue
		}
		if f := p.Files[name]; f.Digest != "sha256:"+hex {
			errorf(p.where(name), "the blob's bytes hash to %s, not to the digest its name gives: the blob was changed after it was written", f.Digest)
		}
	}
	// Every reference is present, from index.json down.
	var top node
	if err := json.Unmarshal(p.index, &top); err != nil {
		return // layoutImages reported it
	}
	type ref struct {
		d    descriptor
		from string
	}
	queue := make([]ref, 0, len(top.Manifests))
	for _, d := range top.Manifests {
		queue = append(queue, ref{d, p.where(path.Join(ImagesDir, "index.json"))})
	}
	seen := map[string]bool{}
	for walked := 0; len(queue) > 0; walked++ {
		if walked >= maxLayoutRefs {
			errorf(p.where(path.Join(ImagesDir, "index.json")), "the image layout holds more than %d references", maxLayoutRefs)
			return
		}
		r := queue[0]
		queue = queue[1:]
		hex, ok := strings.CutPrefix(r.d.Digest, "sha256:")
		if !ok || !sha256Hex.MatchString(hex) {
			errorf(r.from, "a descriptor has digest %q: expected sha256: and 64 lower-case hex digits", r.d.Digest)
			continue
		}
		name := blobsDir + "sha256/" + hex
		f, ok := p.Files[name]
		switch {
		case !ok && nonDistributable(r.d.MediaType):
			continue
		case !ok:
			errorf(r.from, "references %s (%s), which is not in the expansion", r.d.Digest, r.d.MediaType)
			continue
		case f.Size != r.d.Size:
			errorf(r.from, "references %s as %d bytes, but the blob is %d bytes", r.d.Digest, r.d.Size, f.Size)
			continue
		}
		if seen[hex] || (!isIndexType(r.d.MediaType) && !isManifestType(r.d.MediaType)) {
			seen[hex] = true
			continue
		}
		seen[hex] = true
		data, ok := blobs[name]
		if !ok {
			if overBudget {
				errorf(p.where(name), "the image layout's manifests and configs exceed %d MiB, so their references cannot be checked", maxLayoutJSON>>20)
				return
			}
			errorf(p.where(name), "a %s that is not a JSON document", r.d.MediaType)
			continue
		}
		var n node
		if err := json.Unmarshal(data, &n); err != nil {
			errorf(p.where(name), "a %s that does not decode: %v", r.d.MediaType, err)
			continue
		}
		for _, c := range n.Manifests {
			queue = append(queue, ref{c, p.where(name)})
		}
		if n.Config != nil {
			queue = append(queue, ref{*n.Config, p.where(name)})
		}
		for _, c := range n.Layers {
			queue = append(queue, ref{c, p.where(name)})
		}
	}
}
