package action

import "testing"

func TestTemplateLine(t *testing.T) {
	tmpl := "a: 1\nlabels:\n  {{- toYaml .Values.labels | nindent 2 }}\nspec:\n  replicas: {{ .Values.n }}\n  bad: x\n"
	text := "a: 1\nlabels:\n  x: y\n  z: w\nspec:\n  replicas: 3\n  bad: x\n"
	for _, tc := range []struct {
		name              string
		line, col         int
		wantLine, wantCol int
	}{
		{"before the expansion", 1, 1, 1, 1},
		{"a literal line after lines were added", 7, 3, 6, 3},
		{"a templated line after lines were added", 6, 13, 5, 13},
		{"a line the template made", 4, 3, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, c := templateLine(tmpl, text, tc.line, tc.col)
			if l != tc.wantLine || c != tc.wantCol {
				t.Errorf("templateLine(%d, %d) = %d, %d; want %d, %d", tc.line, tc.col, l, c, tc.wantLine, tc.wantCol)
			}
		})
	}
}

func TestGuessLine(t *testing.T) {
	tmpl := "spec:\n  ports:\n  - port: 80\n    targetPrt: 8080\n"
	for _, tc := range []struct {
		ptr       string
		line, col int
	}{
		{"/spec/ports/0/targetPrt", 4, 5},
		{"/spec/ports/0", 2, 3},
		{"/spec/nothere", 0, 0},
	} {
		if l, c := guessLine(tmpl, tc.ptr); l != tc.line || c != tc.col {
			t.Errorf("guessLine(%s) = %d, %d; want %d, %d", tc.ptr, l, c, tc.line, tc.col)
		}
	}
}
