package nodeagent_test

import (
	"testing"

	"github.com/kubeplug/kubeplug/pkg/nodeagent"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// The renderer writes what the agent reads; the two packages must agree on where.
func TestPathsMatchTheRenderer(t *testing.T) {
	for _, p := range [][2]string{
		{nodeagent.HooksManifestPath, render.HooksManifestPath},
		{nodeagent.HooksDir, render.HooksDir},
		{nodeagent.PhaseBeforeNodeup, render.PhaseBeforeNodeup},
		{nodeagent.PhaseAfterNodeup, render.PhaseAfterNodeup},
		{nodeagent.PhaseAfterDeploy, render.PhaseAfterDeploy},
	} {
		if p[0] != p[1] {
			t.Errorf("node agent has %q, renderer %q", p[0], p[1])
		}
	}
}
