package expr_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/expr"
)

func TestCompile(t *testing.T) {
	for _, tt := range []struct {
		name    string
		env     *expr.Env
		src     string
		wantErr string
		// issue is the position of the first issue, when wantErr is a compile error.
		line, column int
	}{
		{name: "object", env: expr.Object, src: `object.data.ready == "true"`},
		{name: "optional field", env: expr.Object, src: `object.?status.?readyReplicas.orValue(0) >= 1`},
		{name: "strings extension", env: expr.Object, src: `object.metadata.name.lowerAscii().startsWith("a")`},
		{name: "dyn is checked when evaluated", env: expr.Object, src: `object.data.ready`},
		{name: "objects", env: expr.Objects, src: `objects.all(o, o.metadata.name != "")`},
		{name: "syntax", env: expr.Object, src: `object.data.ready ==`, wantErr: "Syntax error", line: 1, column: 21},
		{name: "other variable", env: expr.Object, src: `size(objects) > 0`, wantErr: "undeclared reference to 'objects' (in container '') (column 6)", line: 1, column: 6},
		{name: "second line", env: expr.Objects, src: "size(objects) > 0 &&\n  object.x", wantErr: "(line 2, column 3)", line: 2, column: 3},
		{name: "not a bool", env: expr.Objects, src: `size(objects)`, wantErr: "the expression yields int, expected bool"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.env.Compile(tt.src)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, expected one containing %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q spans lines", err)
			}
			var ce *expr.Error
			if tt.line == 0 {
				if nb := (*expr.NotBoolError)(nil); !errors.As(err, &nb) {
					t.Errorf("error %v is not a *NotBoolError", err)
				}
				return
			}
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not an *expr.Error", err)
			}
			if is := ce.Issues[0]; is.Line != tt.line || is.Column != tt.column {
				t.Errorf("first issue at line %d, column %d, expected %d, %d", is.Line, is.Column, tt.line, tt.column)
			}
		})
	}
}

func TestEval(t *testing.T) {
	obj := map[string]any{"data": map[string]any{"ready": "true", "count": "3"}}
	for _, tt := range []struct {
		name    string
		src     string
		want    bool
		wantErr string
	}{
		{name: "true", src: `object.data.ready == "true"`, want: true},
		{name: "false", src: `object.data.ready == "false"`},
		{name: "missing field", src: `object.status.phase == "Ready"`, wantErr: "no such key: status"},
		{name: "dyn not a bool", src: `object.data.count`, wantErr: "the expression yields string, expected bool"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := expr.Object.Compile(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Eval(t.Context(), map[string]any{"object": obj})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, expected one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Eval = %v, %v; expected %v", got, err, tt.want)
			}
		})
	}
}

// Costly is a cheap-looking expression that CostLimit refuses over a long string:
// CEL prices contains at (len/10)*(len(sub)/10), so over 40,000 characters it
// costs 16 million units, while over a short string it is true and cheap.
const Costly = `object.data.s.contains(object.data.s)`

func costly(n int) map[string]any {
	return map[string]any{"data": map[string]any{"s": strings.Repeat("a", n)}}
}

func TestCostLimitStopsAnExpensiveEvaluation(t *testing.T) {
	p, err := expr.Object.Compile(Costly)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Eval(t.Context(), map[string]any{"object": costly(40_000)}); err == nil || !strings.Contains(err.Error(), "cost limit exceeded") {
		t.Fatalf("error %v, expected the cost limit to stop the evaluation", err)
	}
	if ok, err := p.Eval(t.Context(), map[string]any{"object": costly(100)}); !ok || err != nil {
		t.Fatalf("Eval = %v, %v over a short string", ok, err)
	}
}

func TestEvalStopsWhenCanceled(t *testing.T) {
	p, err := expr.Objects.Compile(`objects.all(o, o.x == 1)`)
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]any, 1000)
	for i := range objs {
		objs[i] = map[string]any{"x": int64(1)}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Eval(ctx, map[string]any{"objects": objs}); err == nil {
		t.Fatal("a canceled evaluation succeeded")
	}
}
