package expansion_test

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/expansion"
)

// forge rewrites the archive in through f, then rewrites checksums.txt to match
// every file as changed, as an attacker who can write the package would: what
// is left to catch the change is the image layout's content addresses.
func forge(t *testing.T, in string, f func(name string, data []byte) []byte) string {
	t.Helper()
	sums := map[string]string{}
	return rewrite(t, in, func(h *tar.Header, data []byte, _ *tar.Writer) ([]byte, bool) {
		name := strings.TrimPrefix(h.Name, "./")
		if h.Typeflag != tar.TypeReg {
			return data, true
		}
		if name == expansion.ChecksumsFile {
			var lines []string
			for n, s := range sums {
				lines = append(lines, s+"  "+n)
			}
			slices.SortFunc(lines, func(a, b string) int { return strings.Compare(a[66:], b[66:]) })
			return []byte(strings.Join(lines, "\n") + "\n"), true
		}
		data = f(name, data)
		sum := sha256.Sum256(data)
		sums[name] = hex.EncodeToString(sum[:])
		return data, true
	})
}

func TestLayoutVerifiedByContentAddress(t *testing.T) {
	ctx := context.Background()
	host := startRegistry(t)
	img := pushRandom(t, host+"/team/app:v1")
	good := filepath.Join(t.TempDir(), "site.tar")
	if _, l := expansion.Create(ctx, source(t, img), good, expansion.CreateOptions{}); l.HasFatal() {
		t.Fatal(l)
	}
	if _, l := expansion.Open(ctx, good, expansion.Limits{}); l.HasFatal() {
		t.Fatal(l)
	}
	// The biggest blob is a layer.
	var layer string
	var layerSize int
	rewrite(t, good, func(h *tar.Header, data []byte, _ *tar.Writer) ([]byte, bool) {
		if n := strings.TrimPrefix(h.Name, "./"); strings.HasPrefix(n, "images/blobs/") && len(data) > layerSize {
			layer, layerSize = n, len(data)
		}
		return data, true
	})
	for _, tc := range []struct {
		name string
		f    func(name string, data []byte) []byte
		want []string
	}{
		{"a layer changed, checksums.txt rewritten", func(name string, data []byte) []byte {
			if name == layer {
				data = append([]byte(nil), data...)
				data[len(data)/2] ^= 0xff
			}
			return data
		}, []string{layer + ": the blob's bytes hash to sha256:", "not to the digest its name gives"}},
		{"an index of 10,000 manifests that are not there", func(name string, data []byte) []byte {
			if name != "images/index.json" {
				return data
			}
			var idx map[string]any
			if err := json.Unmarshal(data, &idx); err != nil {
				t.Fatal(err)
			}
			ms := idx["manifests"].([]any)
			for i := range 10_000 {
				ms = append(ms, map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": fmt.Sprintf("sha256:%064x", i), "size": 500})
			}
			idx["manifests"] = ms
			out, _ := json.Marshal(idx)
			return out
		}, []string{"images/index.json: references sha256:0000000000000000000000000000000000000000000000000000000000000000 (application/vnd.oci.image.manifest.v1+json), which is not in the expansion", "and 9980 more problems in the image layout (10000 in all; the first 20 are shown)"}},
		{"a descriptor that climbs out", func(name string, data []byte) []byte {
			if name != "images/index.json" {
				return data
			}
			var idx map[string]any
			if err := json.Unmarshal(data, &idx); err != nil {
				t.Fatal(err)
			}
			idx["manifests"] = append(idx["manifests"].([]any), map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:../../../etc/passwd", "size": 1})
			out, _ := json.Marshal(idx)
			return out
		}, []string{`images/index.json: a descriptor has digest "sha256:../../../etc/passwd"`}},
		{"nothing changed", func(_ string, data []byte) []byte { return data }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forged := forge(t, good, tc.f)
			_, l := expansion.Open(ctx, forged, expansion.Limits{})
			msg := l.String()
			if tc.want == nil {
				if l.HasFatal() {
					t.Fatalf("an unchanged package: %s", msg)
				}
				return
			}
			if !l.HasFatal() {
				t.Fatalf("accepted; diagnostics %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("diagnostics %.3000q\nlack %q", msg, w)
				}
			}
			if len(l) > 30 {
				t.Errorf("%d diagnostics: the layout's are capped", len(l))
			}
		})
	}
}
