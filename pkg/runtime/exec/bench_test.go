package exec_test

import (
	"context"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/runtime/exec"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// BenchmarkRun measures the per-stage overhead of the exec runtime: digest check,
// private copy, process start, request and response, for a shell plugin that
// answers at once. Target: < 10ms.
//
//	go test ./pkg/runtime/exec -run '^$' -bench . -benchtime 200x
func BenchmarkRun(b *testing.B) {
	rt, err := exec.New(script(b, "cat >/dev/null\necho '"+okResponse+"'\n", true), exec.Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := request(stage.Initialise)
	ctx := context.Background()
	for b.Loop() {
		if _, err := rt.Run(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
