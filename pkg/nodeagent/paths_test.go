package nodeagent_test

import (
	"testing"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// The renderer writes what the agent reads; the two packages must agree on where.
func TestPathsMatchTheRenderer(t *testing.T) {
	for _, p := range [][2]string{
		{hookspec.HooksManifestPath, render.HooksManifestPath},
		{hookspec.HooksDir, render.HooksDir},
		{hookspec.PhaseBeforeNodeup, render.PhaseBeforeNodeup},
		{hookspec.PhaseAfterNodeup, render.PhaseAfterNodeup},
		{hookspec.PhaseAfterDeploy, render.PhaseAfterDeploy},
	} {
		if p[0] != p[1] {
			t.Errorf("node agent has %q, renderer %q", p[0], p[1])
		}
	}
}
