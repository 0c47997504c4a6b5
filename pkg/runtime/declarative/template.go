package declarative

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

// funcs are the template functions: sprig's, less those that read the host (a
// plugin's output must not depend on where it is rendered), plus toYaml.
var funcs = func() template.FuncMap {
	f := sprig.TxtFuncMap()
	for _, name := range []string{"env", "expandenv", "getHostByName"} {
		delete(f, name)
	}
	f["toYaml"] = func(v any) (string, error) {
		b, err := yaml.Marshal(v)
		if err != nil {
			return "", err
		}
		return strings.TrimSuffix(string(b), "\n"), nil
	}
	f["required"] = func(msg string, v any) (any, error) {
		if v == nil || v == "" {
			return nil, fmt.Errorf("%s", msg)
		}
		return v, nil
	}
	return f
}()

// templateError is a template failure located inside the template's text.
type templateError struct {
	Line, Column int // 1-based, 0 when unknown
	Msg          string
}

func (e *templateError) Error() string { return e.Msg }

// execute renders text as a template, the way Helm does: a missing value is nil (so
// `{{ .Values.x | default "y" }}` works) and renders as nothing; `required` makes a
// value mandatory.
func execute(text string, data any) (string, error) {
	if !strings.Contains(text, "{{") {
		return text, nil
	}
	t, err := template.New("t").Funcs(funcs).Option("missingkey=zero").Parse(text)
	if err != nil {
		return "", locate(err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", locate(err)
	}
	return strings.ReplaceAll(b.String(), "<no value>", ""), nil
}

var templateErrRE = regexp.MustCompile(`^template: t:(\d+)(?::(\d+))?: (?:executing "t" )?(.*)$`)

// locate turns text/template's "template: t:3:7: executing "t" at <.x>: ..." into a
// position and the part of the message a user needs.
func locate(err error) error {
	m := templateErrRE.FindStringSubmatch(err.Error())
	if m == nil {
		return &templateError{Msg: strings.TrimPrefix(err.Error(), "template: ")}
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	return &templateError{Line: line, Column: col, Msg: m[3]}
}
