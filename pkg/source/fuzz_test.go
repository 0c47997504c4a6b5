package source_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/source"
	"github.com/kubeplug/kubeplug/test/harness/fuzzseed"
)

// FuzzDecodeIndex decodes any catalog index, YAML or JSON: it never panics; a
// JSON index the streaming decoder accepts is what json.Unmarshal makes of it
// (and one json.Unmarshal accepts is accepted, unless past MaxIndexEntries);
// listing it reports at most MaxIndexErrors broken entries one by one.
func FuzzDecodeIndex(f *testing.F) {
	good := `{"apiVersion":"kubeplug.dev/v1alpha1","kind":"PluginIndex","entries":{"a":[{"version":"1.0.0","digest":"sha256:` + strings.Repeat("ab", 32) + `","urls":["a-1.0.0.tgz"]}]}}`
	for _, s := range []string{
		good,
		"apiVersion: kubeplug.dev/v1alpha1\nkind: PluginIndex\nentries:\n  a:\n  - {version: 1.0.0, digest: sha256:" + strings.Repeat("ab", 32) + ", urls: [a-1.0.0.tgz]}\n",
		`{"entries":{"a":[{}]},"entries":{"b":[{}]}}`,
		`{"ENTRIES":{"a":null},"Kind":"PluginIndex"}`,
		`{"entries":{"a":[{"version":"bad"},{"version":"1.0.0","urls":["http://192.0.2.1/a.tgz"],"digest":"sha256:` + strings.Repeat("0", 64) + `"}]}}`,
		`{"entries":{"a":[{"urls":["https://u:p@h/a.tgz"]}]}}`,
		`{"entries":null}`, `null`, `[]`, `{}`, `{"a":1} {"b":2}`, `{"entries":{"a":[1]}}`,
		`{"entries":{"a":[` + strings.Repeat(`{},`, 100) + `{}]}}`,
		strings.Repeat(`{"x":`, 1000) + "1" + strings.Repeat("}", 1000),
	} {
		f.Add([]byte(s))
	}
	fuzzseed.Add(f, fuzzseed.YAML())
	base, _ := url.Parse("https://catalog.example/index.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := source.DecodeIndex(data)
		if t0 := strings.TrimLeft(string(data), " \t\r\n"); strings.HasPrefix(t0, "{") {
			var want source.CatalogIndex
			werr := json.Unmarshal(data, &want)
			switch {
			case werr == nil && err != nil && !errors.Is(err, source.ErrIndexTooLarge):
				t.Fatalf("json.Unmarshal accepts what DecodeIndex refuses: %v", err)
			case werr == nil && err == nil && !reflect.DeepEqual(*x, want):
				t.Fatalf("DecodeIndex = %+v, json.Unmarshal = %+v", *x, want)
			}
		}
		if err != nil {
			return
		}
		_, l := x.Versions(source.OriginCatalog, base, "index.json")
		if len(l) > source.MaxIndexErrors+2 {
			t.Fatalf("%d diagnostics", len(l))
		}
		if strings.Contains(l.String(), ":p@") {
			t.Fatalf("a password printed: %s", l)
		}
	})
}
