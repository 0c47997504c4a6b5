package hookspec_test

import (
	"errors"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/test/harness/fuzzseed"
)

// FuzzParseManifest checks that the node agent's hooks manifest, whatever its
// bytes, never panics the parser, that every error is a *ManifestError naming
// the file, and that an accepted manifest has a behaviour on every hook and can
// be ordered without panicking.
func FuzzParseManifest(f *testing.F) {
	fuzzseed.Add(f, fuzzseed.YAML())
	for _, s := range []string{
		`{"hooks":[{"plugin":"a","name":"h","at":"beforeNodeup","command":["true"]}]}`,
		`{"hooks":[{"plugin":"a","name":"h","at":"afterNodeup","script":"/etc/kubeplug/hooks/a/h","behavior":"sync-enforce","timeout":"5s"},` +
			`{"plugin":"b","name":"g","at":"afterNodeup","command":["x"],"requires":["a/h"],"before":["c/i"]}]}`,
		`{"hooks":[{"plugin":"a","name":"h","at":"beforeNodeup","url":"https://example.com/x","sha256":"` + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + `"}]}`,
		`{"hooks":[{"plugin":"a","name":"h","at":"beforeNodeup","command":["x"],"requires":["a/h"]}]}`,
		`{"hooks":[{"plugin":"a","name":"h","at":"beforeNodeup","command":["x"]},{"plugin":"a","name":"h","at":"beforeNodeup","command":["y"]}]}`,
		`{"hooks":[{"plugin":"A","name":"../x","at":"never","timeout":"-1s"}]}`,
		`{"hooks":null}`, `[]`, `{"hooks":[1e400]}`, `{"hooks":[{"command":"x"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := hookspec.ParseManifest("hooks.json", data)
		if err != nil {
			var me *hookspec.ManifestError
			if !errors.As(err, &me) || me.Path != "hooks.json" {
				t.Fatalf("error %v (%T) is not a *ManifestError naming the file", err, err)
			}
			if m != nil {
				t.Fatalf("a manifest returned with error %v", err)
			}
			return
		}
		for _, h := range m.Hooks {
			if h.Behavior == "" {
				t.Errorf("hook %s accepted without a behaviour", h.ID())
			}
			_ = h.TimeoutOrDefault()
		}
		_, _ = hookspec.Order(m.Hooks)
	})
}
