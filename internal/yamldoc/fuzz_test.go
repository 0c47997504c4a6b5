package yamldoc_test

import (
	"testing"
	"time"

	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/test/harness/fuzzseed"
)

// FuzzParse checks that Parse never panics, answers quickly whatever the input
// (an alias bomb included), and that every diagnostic it gives names the file.
func FuzzParse(f *testing.F) {
	fuzzseed.Add(f, fuzzseed.YAML())
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		doc, l := yamldoc.Parse("f.yaml", data)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("Parse took %s", took)
		}
		if (doc == nil) != l.HasFatal() {
			t.Fatalf("doc %v with diagnostics:\n%s", doc != nil, l)
		}
		for _, d := range l {
			if d.File != "f.yaml" {
				t.Errorf("diagnostic without the file: %s", d)
			}
		}
		docs, _ := yamldoc.ParseAll("f.yaml", data)
		_ = docs
	})
}
