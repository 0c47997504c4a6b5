package yamldoc

import (
	"fmt"
	"strings"
	"testing"
)

// manifestStream is n ConfigMaps as one file of manifests, as a plugin of
// BenchmarkApplySizes (test/bench) renders them.
func manifestStream(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p00-cm%03d\n  namespace: bench\ndata:\n  index: \"%d\"\n  payload: %s\n  plugin: \"0\"\n", i, i, strings.Repeat("x", 256))
	}
	return []byte(b.String())
}

func BenchmarkParseAll(b *testing.B) {
	data := manifestStream(50)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, l := ParseAll("objects.yaml", data); l.HasFatal() {
			b.Fatal(l)
		}
	}
}
