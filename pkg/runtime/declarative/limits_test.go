package declarative

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestTemplateLimits: templates that would render too much, or run too long, stop
// with an error naming the limit, long before they cost the host anything.
func TestTemplateLimits(t *testing.T) {
	small := func() *limits {
		l := newLimits(context.Background())
		l.maxTemplate, l.maxPlugin, l.templateTime = 1<<20, 3<<20, 200*time.Millisecond
		return l
	}
	// 8000² bare iterations: over a second on an idle machine, well past the
	// 200 ms limit (3000² finished inside it on a fast idle core).
	big := make([]any, 8000)
	data := map[string]any{"Values": map[string]any{"big": big}}
	for _, tc := range []struct {
		name  string
		texts []string
		want  string
	}{
		{"repeat", []string{`{{ repeat 200000000 "x" }}`}, "more than the output limit of 1 MiB per template"},
		{"repeat in a pipeline", []string{`{{ "x" | repeat 200000000 | b64enc }}`}, "more than the output limit"},
		{"printf width", []string{`{{ printf "%0200000000d" 1 }}`}, "more than the output limit"},
		{"printf star width", []string{`{{ printf "%*d" 200000000 1 }}`}, "more than the output limit"},
		{"indent", []string{`{{ indent 200000000 "a\nb" }}`}, "more than the output limit"},
		{"until", []string{`{{ range until 100000000 }}{{ end }}`}, "longer than the 1048576 element limit"},
		{"output of a loop", []string{`{{ range until 100000 }}` + strings.Repeat("x", 100) + `{{ end }}`}, "the output exceeds the 1 MiB limit per template"},
		{"output of a plugin", []string{strings.Repeat("{{/**/}}", 1) + strings.Repeat("x", 900<<10), strings.Repeat("{{/**/}}x", 100<<10), `{{ repeat 900000 "y" }}`, `{{ repeat 900000 "y" }}`, `{{ repeat 900000 "y" }}`}, "of 3 MiB per plugin"},
		{"time in functions", []string{`{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}`}, "ran past the 200ms limit per template"},
		{"time in a bare loop", []string{`{{ range .Values.big }}{{ range $.Values.big }}{{ end }}{{ end }}`}, "ran past the 200ms limit per template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := small()
			start := time.Now()
			var err error
			for _, text := range tc.texts {
				if _, err = l.execute(text, data); err != nil {
					break
				}
			}
			// The error proves the limit fired; this bound only catches a limit that
			// fires after the work is done, generously, as CI machines are loaded.
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %s", took)
			}
			if te, ok := errors.AsType[*templateError](err); !ok || !strings.Contains(te.Msg, tc.want) {
				t.Errorf("error = %v, want one saying %q", err, tc.want)
			}
		})
	}
}
