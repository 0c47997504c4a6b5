package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/action"
)

// outputFormats are the values --output takes besides jsonpath=TEMPLATE.
var outputFormats = []string{"text", "json", "yaml", "name", "jsonpath="}

// checkOutput validates an --output value: a format, not a path. A value that
// looks like a path gets a hint, since render -o DIR used to write a directory.
func checkOutput(output, command string) error {
	switch {
	case output == "text", output == "json", output == "yaml", output == "name":
		return nil
	case strings.HasPrefix(output, "jsonpath="):
		if _, err := printers.NewJSONPathPrinter(strings.TrimPrefix(output, "jsonpath=")); err != nil {
			return fmt.Errorf("invalid --output %q: %w", output, err)
		}
		return nil
	}
	hint := ""
	if command == "render" {
		hint = " (render writes files into --output-dir DIR)"
	} else if strings.ContainsAny(output, `/\.`) || filepath.IsAbs(output) {
		hint = " (a format, not a file: redirect the output to write a file)"
	}
	return fmt.Errorf("invalid --output %q: expected text, json, yaml, name or jsonpath=TEMPLATE%s", output, hint)
}

// print writes v in the --output format, calling text for the text format.
// json and yaml print v as it is; jsonpath and name see it as an object, a
// list result as {"items": [...]} (as kubectl's lists), see docs/output.md.
func (o *options) print(v any, text func(w io.Writer) error) error {
	w := o.streams.Out
	switch {
	case o.output == "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	case o.output == "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("render yaml: %w", err)
		}
		_, err = w.Write(b)
		return err
	case o.output == "name":
		obj, err := asObject(v)
		if err != nil {
			return err
		}
		return printNames(w, obj)
	case strings.HasPrefix(o.output, "jsonpath="):
		obj, err := asObject(v)
		if err != nil {
			return err
		}
		p, err := printers.NewJSONPathPrinter(strings.TrimPrefix(o.output, "jsonpath="))
		if err != nil {
			return fmt.Errorf("invalid --output %q: %w", o.output, err)
		}
		var b bytes.Buffer
		if err := p.PrintObj(&unstructured.Unstructured{Object: obj}, &b); err != nil {
			return fmt.Errorf("--output %s: %w", o.output, err)
		}
		if b.Len() > 0 && !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
			b.WriteByte('\n') // a shell prompt on its own line; a template's own newline is kept as it is
		}
		_, err = w.Write(b.Bytes())
		return err
	}
	if text == nil {
		return fmt.Errorf("this command prints no text; use -o json or -o yaml")
	}
	return text(w)
}

// APIVersion is the apiVersion of kubeplug's structured results.
const APIVersion = "kubeplug.dev/v1alpha1"

// ApplySummary is apply's result with -o yaml, name or jsonpath; with -o json
// it is the last line of the event stream instead (type Summary).
type ApplySummary struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"` // ApplyResult
	// Failed says whether the apply failed (the exit status is 1 then).
	Failed bool `json:"failed"`
	*action.ApplyResult
}

// RenderDiff is diff --against's result with any -o but text: the files that
// would change, in path order, each with its unified diff.
type RenderDiff struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"` // RenderDiff
	Files      []action.FileDiff `json:"files"`
}

// asObject converts v through JSON to a map: a list becomes {"items": list}.
func asObject(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return nil, fmt.Errorf("decode result: %w", err)
	}
	switch t := x.(type) {
	case map[string]any:
		return t, nil
	case []any:
		return map[string]any{"items": t}, nil
	case nil:
		return map[string]any{"items": []any{}}, nil
	}
	return map[string]any{"value": x}, nil
}

// printNames prints one KIND/NAME line per item of a list, or for the object.
func printNames(w io.Writer, obj map[string]any) error {
	items := []any{obj}
	kind := ""
	for _, list := range []struct{ field, kind string }{{"items", ""}, {"files", "file"}, {"plugins", "plugin"}, {"removed", "plugin"}, {"images", "image"}} {
		if l, ok := obj[list.field].([]any); ok {
			items, kind = l, list.kind
			break
		}
	}
	for _, it := range items {
		if s, ok := it.(string); ok && kind != "" { // a list of names: apply's plugins, uninstall's removed
			if _, err := fmt.Fprintln(w, kind+"/"+s); err != nil {
				return err
			}
			continue
		}
		m, _ := it.(map[string]any)
		n, ok := objectName(m)
		if !ok {
			return fmt.Errorf("-o name: this result has no names (it has %s); use -o json or -o jsonpath=", strings.Join(keys(m), ", "))
		}
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	return nil
}

// objectName names a result item: kind/metadata.name for Kubernetes objects,
// plugin/NAME for plugins, revision/N for release revisions, file/PATH for
// rendered files, image/REF for images.
func objectName(m map[string]any) (string, bool) {
	if md, ok := m["metadata"].(map[string]any); ok {
		if n, ok := md["name"].(string); ok && n != "" {
			kind, _ := m["kind"].(string)
			return strings.ToLower(kind) + "/" + n, kind != ""
		}
	}
	for _, k := range []struct{ field, prefix string }{{"plugin", "plugin"}, {"name", "plugin"}, {"path", "file"}, {"image", "image"}} {
		if s, ok := m[k.field].(string); ok && s != "" {
			return k.prefix + "/" + s, true
		}
	}
	if r, ok := m["revision"].(float64); ok {
		return fmt.Sprintf("revision/%d", int(r)), true
	}
	return "", false
}

func keys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	if len(ks) == 0 {
		return []string{"no fields"}
	}
	return ks
}

// table writes rows aligned in columns.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, h := range header {
		if i > 0 {
			_, _ = fmt.Fprint(tw, "\t")
		}
		_, _ = fmt.Fprint(tw, h)
	}
	_, _ = fmt.Fprintln(tw)
	for _, r := range rows {
		for i, c := range r {
			if i > 0 {
				_, _ = fmt.Fprint(tw, "\t")
			}
			_, _ = fmt.Fprint(tw, c)
		}
		_, _ = fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// shortDigest abbreviates sha256:HEX for tables.
func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
