package oci

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Bounds of a registry's answers that are lists: a registry whose `Link:
// rel=next` points back to the same page, or that attaches ten thousand forged
// signatures, costs a bounded number of requests and a clear error.
const (
	// MaxListPages bounds the pages of one listing (tags, referrers); each page
	// is itself bounded to 4 MiB by the client.
	MaxListPages = 100
	// MaxListEntries bounds the entries of one listing, all pages together.
	MaxListEntries = 100_000
	// MaxSignatures bounds the signature referrers tried for one artifact:
	// those annotated with a trusted key's ID first, then in the registry's
	// order; past it verification fails naming how many were skipped.
	MaxSignatures = 16
	// KeyIDAnnotation annotates a signature referrer with its key's ID.
	KeyIDAnnotation = "dev.kubeplug.signature.key-id"
)

// ErrListTooLong is wrapped by listings past MaxListPages or MaxListEntries.
var ErrListTooLong = errors.New("listing too long")

// listBound counts the pages and entries of one listing.
type listBound struct {
	what           string
	pages, entries int
}

// page records a page of n entries; an error once a bound is passed.
func (b *listBound) page(n int) error {
	b.pages++
	b.entries += n
	switch {
	case b.pages > MaxListPages:
		return fmt.Errorf("%w: %s: more than %d pages (does the registry's next link point back?)", ErrListTooLong, b.what, MaxListPages)
	case b.entries > MaxListEntries:
		return fmt.Errorf("%w: %s: more than %d entries", ErrListTooLong, b.what, MaxListEntries)
	}
	return nil
}

// SignaturesToTry orders signature referrers for verification — those whose
// KeyIDAnnotation names one of keyIDs first, otherwise in the registry's order —
// and keeps at most MaxSignatures; skipped is how many were left out.
func SignaturesToTry(descs []ocispec.Descriptor, keyIDs []string) (try []ocispec.Descriptor, skipped int) {
	try = slices.Clone(descs)
	slices.SortStableFunc(try, func(a, b ocispec.Descriptor) int {
		return cmp.Compare(rank(a, keyIDs), rank(b, keyIDs))
	})
	if len(try) > MaxSignatures {
		return try[:MaxSignatures], len(try) - MaxSignatures
	}
	return try, 0
}

func rank(d ocispec.Descriptor, keyIDs []string) int {
	if slices.Contains(keyIDs, d.Annotations[KeyIDAnnotation]) {
		return 0
	}
	return 1
}
