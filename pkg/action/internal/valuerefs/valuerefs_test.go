package valuerefs

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want []string // PATH@LINE:COL, with a trailing "?" when guarded
	}{
		{"no template", "a: b", nil},
		{"plain", "a: {{ .Values.message }}", []string{"message@1:7"}},
		{"nested and dollar", "x\n  {{ $.Values.image.tag }} {{ .Values.a.b }}", []string{"image.tag@2:6", "a.b@2:31"}},
		{"default guards", `{{ .Values.x | default "y" }}`, []string{"x@1:4?"}},
		{"required guards", `{{ required "set x" .Values.x }}`, []string{"x@1:21?"}},
		{"coalesce and empty", `{{ coalesce .Values.a .Values.b }}{{ if empty .Values.c }}{{ end }}`, []string{"a@1:13?", "b@1:23?", "c@1:47?"}},
		{"if guards its body by prefix", "{{ if .Values.tls }}{{ .Values.tls.cert }}{{ .Values.other }}{{ end }}",
			[]string{"tls@1:7?", "tls.cert@1:24?", "other@1:46"}},
		{"a condition tests presence, also under and, or, not",
			`{{ if and .Values.a (or .Values.b (not .Values.c)) }}{{ end }}{{ with .Values.d }}{{ end }}`,
			[]string{"a@1:11?", "b@1:25?", "c@1:40?", "d@1:71?"}},
		{"a condition that uses a value checks it", `{{ if eq .Values.mdoe "fast" }}{{ .Values.mdoe.x }}{{ end }}`,
			[]string{"mdoe@1:10", "mdoe.x@1:35?"}},
		{"hasKey guards the key", `{{ if hasKey .Values "extra" }}{{ .Values.extra.x }}{{ end }}`, []string{"extra.x@1:35?"}},
		{"with changes dot", "{{ with .Values.svc }}{{ .Values.port }}{{ $.Values.svc.port }}{{ $.Values.z }}{{ end }}",
			[]string{"svc@1:9?", "svc.port@1:44?", "z@1:67"}},
		{"range changes dot", "{{ range .Values.items }}{{ .Values.x }}{{ $.Values.y }}{{ end }}", []string{"items@1:10", "y@1:44"}},
		{"index", `{{ index .Values "a" "b" }}`, []string{"a.b@1:10"}},
		{"nested pipeline", `{{ printf "%s" (.Values.a | quote) }}`, []string{"a@1:17"}},
		{"guard reaches into parentheses", `{{ default "x" (.Values.a) }}`, []string{"a@1:17?"}},
		{"define is skipped", `{{ define "x" }}{{ .Values.inner }}{{ end }}{{ template "x" .Values.outer }}`, []string{"outer@1:61"}},
		{"other fields", "{{ .Cluster.name }}{{ .Values }}", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refs, err := Find(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range refs {
				s := strings.Join(r.Path, ".") + "@" + itoa(r.Line) + ":" + itoa(r.Column)
				if r.Guarded {
					s += "?"
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Find(%q)\n got %q\nwant %q", tc.text, got, tc.want)
			}
		})
	}
}

func TestFindParseError(t *testing.T) {
	if _, err := Find("{{ .Values.x "); err == nil {
		t.Error("an unclosed action parsed")
	}
}

func TestLookup(t *testing.T) {
	schema := `{
	  "type": "object",
	  "$defs": {"image": {"type": "object", "properties": {"repository": {"type": "string"}, "tag": {"type": "string"}}}},
	  "properties": {
	    "message": {"type": "string", "minLength": 1},
	    "image": {"$ref": "#/$defs/image"},
	    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
	    "env": {"type": "object", "patternProperties": {"^[A-Z_]+$": {"type": "string"}}},
	    "free": {"type": "object"},
	    "closed": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false},
	    "tls": {"allOf": [{"properties": {"cert": {}}}, {"properties": {"key": {}}}]},
	    "mode": {"if": {"properties": {"x": {"const": 1}}}, "then": {"properties": {"fast": {}}}, "else": {"properties": {"slow": {}}}},
	    "self": {"$ref": "#/properties/self"}
	  }
	}`
	var sch any
	if err := json.Unmarshal([]byte(schema), &sch); err != nil {
		t.Fatal(err)
	}
	withSchema := &Known{Defaults: map[string]any{"replicas": 2, "extra": map[string]any{"b": 1}, "resources": map[string]any{}}, Schema: sch}
	for _, tc := range []struct {
		name  string
		k     *Known
		path  string
		ok    bool
		depth int
		near  []string
	}{
		{"nothing declared", &Known{}, "anything.at.all", true, 0, nil},
		{"property", withSchema, "message", true, 0, nil},
		{"typo", withSchema, "mesage", false, 0, []string{"message"}},
		{"default only", withSchema, "replicas", true, 0, nil},
		{"default map", withSchema, "extra.b", true, 0, nil},
		{"default map typo", withSchema, "extra.c", false, 1, nil},
		{"empty default map is free-form", withSchema, "resources.limits.cpu", true, 0, nil},
		{"ref", withSchema, "image.tag", true, 0, nil},
		{"ref typo", withSchema, "image.tga", false, 1, []string{"tag"}},
		{"additionalProperties", withSchema, "labels.anything", true, 0, nil},
		{"patternProperties", withSchema, "env.FOO", true, 0, nil},
		{"free-form object", withSchema, "free.x.y", true, 0, nil},
		{"closed object", withSchema, "closed.b", false, 1, nil},
		{"allOf", withSchema, "tls.key", true, 0, nil},
		{"allOf typo", withSchema, "tls.kye", false, 1, []string{"key"}},
		{"then", withSchema, "mode.fast", true, 0, nil},
		{"else", withSchema, "mode.slow", true, 0, nil},
		{"if/then/else typo", withSchema, "mode.medium", false, 1, nil},
		{"below a scalar", withSchema, "message.x", true, 0, nil},
		{"self reference ends", withSchema, "self.x", true, 0, nil},
		{"defaults without schema", &Known{Defaults: map[string]any{"name": "x"}}, "naem", false, 0, []string{"name"}},
		{"schema true", &Known{Schema: true}, "x", true, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, depth, near := tc.k.Lookup(strings.Split(tc.path, "."))
			if ok != tc.ok || depth != tc.depth || !slices.Equal(near, tc.near) {
				t.Errorf("Lookup(%s) = %v, %d, %q; want %v, %d, %q", tc.path, ok, depth, near, tc.ok, tc.depth, tc.near)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	k := &Known{Defaults: map[string]any{"message": "hi", "image": map[string]any{"tag": "1"}}}
	got, err := k.Check("a: {{ .Values.mesage }}\nb: {{ .Values.image.tga.x }}\nc: {{ .Values.nope | default 1 }}\n")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, f := range got {
		msgs = append(msgs, itoa(f.Line)+":"+itoa(f.Column)+": "+f.Message("the plugin's values"))
	}
	want := []string{
		`1:7: .Values.mesage is not in the plugin's values (defaults or schema), so it renders empty; did you mean "message"?`,
		`2:7: .Values.image.tga is not in the plugin's values (defaults or schema), so it renders empty; did you mean "tag"?`,
	}
	if !slices.Equal(msgs, want) {
		t.Errorf("Check:\n got %q\nwant %q", msgs, want)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
