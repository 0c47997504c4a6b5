package action

import (
	"maps"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/engine"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// TestWaitChainsRankPluginsOthersWaitFor: a plugin's priority is how long the
// longest chain of plugins waiting on it is, so that when plugins apply at
// once, the one the most plugins queue behind goes first.
func TestWaitChainsRankPluginsOthersWaitFor(t *testing.T) {
	planned := func(name string, after ...string) *engine.Planned {
		return &engine.Planned{Package: &plugin.Package{Name: name}, After: after}
	}
	// base <- mid <- top, base <- side, alone.
	got := waitChains([]*engine.Planned{
		planned("base"), planned("alone"), planned("mid", "base"), planned("side", "base"), planned("top", "mid"),
	})
	want := map[string]int{"base": 2, "mid": 1, "side": 0, "top": 0, "alone": 0}
	if !maps.Equal(got, want) {
		t.Errorf("waitChains = %v, want %v", got, want)
	}
}
