package declarative

import (
	"errors"
	"testing"
)

// TestExecute: templates behave like Helm's, and cannot read the host.
func TestExecute(t *testing.T) {
	data := map[string]any{"Values": map[string]any{"n": 3, "list": []any{"a", "b"}}}
	for _, tc := range []struct {
		name, text, want, err string
		line, col             int
	}{
		{name: "plain text is not parsed", text: "{ not a template }", want: "{ not a template }"},
		{name: "a missing value renders as nothing", text: "x={{ .Values.missing }}", want: "x="},
		{name: "default", text: `{{ .Values.missing | default "y" }}`, want: "y"},
		{name: "toYaml", text: "{{ toYaml .Values.list }}", want: "- a\n- b"},
		{name: "required", text: `{{ required "n is required" .Values.missing }}`, err: `at <required "n is required" .Values.missing>: error calling required: n is required`, line: 1, col: 3},
		{name: "env is absent", text: `{{ env "HOME" }}`, err: `function "env" not defined`, line: 1},
		{name: "parse error has a line", text: "a\n{{ if }}", err: "missing value for if", line: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := execute(tc.text, data)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Errorf("execute = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			te, ok := errors.AsType[*templateError](err)
			if !ok || te.Msg != tc.err || te.Line != tc.line || te.Column != tc.col {
				t.Errorf("error = %#v, want %q at %d:%d", err, tc.err, tc.line, tc.col)
			}
		})
	}
}
