package engine

import (
	"bytes"
	"fmt"
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

// execute renders text as a template named name. A missing map key is an error, so a
// typo in a values path fails loudly instead of rendering "<no value>".
func execute(name, text string, data any) (string, error) {
	if !strings.Contains(text, "{{") {
		return text, nil
	}
	t, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return "", cleanTemplateErr(err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", cleanTemplateErr(err)
	}
	return b.String(), nil
}

// cleanTemplateErr drops text/template's "template: " prefix; the caller names the
// file and field.
func cleanTemplateErr(err error) error {
	return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "template: "))
}
