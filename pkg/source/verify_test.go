package source_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/sign"
	"github.com/kubeplug/kubeplug/pkg/source"
)

// writeSigned writes the package tree as an archive at file and, with s, its
// signature beside it.
func writeSigned(t *testing.T, file string, fsys fstest.MapFS, s *sign.Signer) {
	t.Helper()
	var buf bytes.Buffer
	if err := archive.Write(&buf, fsys); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if s == nil {
		return
	}
	sig, err := s.Sign(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file+sign.SigExt, sig, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVerifiedArchive checks the trust policy of an archive source: a trusted
// signature passes; a package swapped (with a valid signature) after it was listed
// is refused, because the bytes that verified are not the package returned.
func TestVerifiedArchive(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kp, err := sign.GenerateKeyPair(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(kp.Private, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(dir, "k.pub")
	if err := os.WriteFile(pub, kp.Public, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "x.tgz")
	v1 := fstest.MapFS{"plugin.yaml": manifest("x", "1.0.0", "{}")}
	writeSigned(t, file, v1, s)

	src := source.Verified(source.Archive(plugin.OriginUser, file), file, source.TrustPolicy{Keys: []string{pub}, Required: true})
	vs, l := src.List(ctx)
	if l.HasFatal() || len(vs) != 1 {
		t.Fatalf("List: %v %v", vs, l)
	}
	pkg0, l := src.Fetch(ctx, vs[0])
	if pkg0 == nil || l.HasFatal() {
		t.Fatalf("Fetch of a signed package: %v", l)
	}
	if !strings.HasPrefix(pkg0.SignedBy, pub+" (sha256:") {
		t.Errorf("a package whose signature verified says SignedBy %q, want the key", pkg0.SignedBy)
	}

	// Another package, validly signed, replaces the file after listing.
	writeSigned(t, file, fstest.MapFS{"plugin.yaml": manifest("x", "1.0.0", "{}"), "extra": {Data: []byte("x")}}, s)
	pkg, l := src.Fetch(ctx, vs[0])
	if pkg != nil || !strings.Contains(l.String(), "plugin x@1.0.0 from source "+file+": the archive changed while it was read") {
		t.Fatalf("Fetch of a swapped package: %v, %v", pkg, l)
	}

	// Unsigned, with and without Required.
	if err := os.Remove(file + sign.SigExt); err != nil {
		t.Fatal(err)
	}
	vs, _ = src.List(ctx)
	if pkg, l := src.Fetch(ctx, vs[0]); pkg != nil || !strings.Contains(l.String(), "not signed: the source requires a signature by "+pub) {
		t.Fatalf("Fetch of an unsigned package: %v", l)
	}
	opt := source.Verified(source.Archive(plugin.OriginUser, file), file, source.TrustPolicy{Keys: []string{pub}})
	vs, _ = opt.List(ctx)
	if pkg, l := opt.Fetch(ctx, vs[0]); pkg == nil || l.HasFatal() {
		t.Fatalf("Fetch of an unsigned package, signatures optional: %v", l)
	} else if pkg.SignedBy != "" {
		t.Errorf("an unsigned package says SignedBy %q", pkg.SignedBy)
	}
}
