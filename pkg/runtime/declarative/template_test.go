package declarative

import (
	"errors"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/stage"
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

// TestStrictPluginReads: a template reading another plugin's value that is not
// there (a plugin the cluster lacks, a misspelled key) fails at the read,
// naming it, instead of rendering as nothing; a read the template marks as
// optional (if, with, index, default, optional) does not.
func TestStrictPluginReads(t *testing.T) {
	plugins := map[string]stage.PluginValues{
		"dns":           {Version: "1.0.0", Values: map[string]any{"domain": "cluster.local", "nested": map[string]any{"a": "b"}, "empty": ""}},
		"control-plane": {Version: "1.0.0", Values: map[string]any{"pkiDir": "/etc/pki"}},
	}
	data := map[string]any{"Values": map[string]any{}, "Plugins": plugins}
	for _, tc := range []struct {
		name, text, want, err string
		line, col             int
	}{
		{name: "present", text: "{{ .Plugins.dns.Values.domain }}", want: "cluster.local"},
		{name: "present nested", text: "{{ $.Plugins.dns.Values.nested.a }}", want: "b"},
		{name: "present but empty", text: "x{{ .Plugins.dns.Values.empty }}", want: "x"},
		{name: "index then fields", text: `{{ (index .Plugins "control-plane").Values.pkiDir }}`, want: "/etc/pki"},
		{name: "misspelled key", text: "a\nd={{ .Plugins.dns.Values.domian }}", line: 2, col: 5,
			err: ".Plugins.dns.Values.domian: plugin dns has no value domian; say it is optional with `with`, `index`, `default` or `optional`"},
		{name: "missing plugin", text: "{{ .Plugins.logging.Values.level }}", line: 1, col: 3,
			err: ".Plugins.logging.Values.level reads plugin logging, which is not in the cluster; say it is optional with `with`, `index`, `default` or `optional`"},
		{name: "missing after index", text: `{{ (index .Plugins "control-plane").Values.pki }}`, line: 1, col: 4,
			err: ".Plugins.control-plane.Values.pki: plugin control-plane has no value pki; say it is optional with `with`, `index`, `default` or `optional`"},
		{name: "missing as a function argument", text: `{{ quote .Plugins.dns.Values.x }}`, line: 1, col: 9,
			err: ".Plugins.dns.Values.x: plugin dns has no value x; say it is optional with `with`, `index`, `default` or `optional`"},
		{name: "with", text: "{{ with .Plugins.logging }}{{ .Values.level }}{{ end }}-", want: "-"},
		{name: "if", text: "{{ if .Plugins.dns.Values.x }}y{{ else }}n{{ end }}", want: "n"},
		{name: "default", text: `{{ .Plugins.dns.Values.x | default "d" }}`, want: "d"},
		{name: "default prefix", text: `{{ default "d" .Plugins.logging.Values.level }}`, want: "d"},
		{name: "optional", text: `[{{ optional .Plugins.logging.Values.level }}]`, want: "[]"},
		{name: "index", text: `[{{ index .Plugins.dns.Values "x" }}]`, want: "[]"},
		{name: "own values stay lenient", text: "[{{ .Values.x }}]", want: "[]"},
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
