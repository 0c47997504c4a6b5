package local

import (
	"context"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/provider"
)

// TestStepsAsData: the registered creation steps are Up's, named once, and
// only node-routes may be skipped.
func TestStepsAsData(t *testing.T) {
	s := provider.StepsOf(nil) // the default provider is the local one
	if len(s.Steps) != len(upSteps) {
		t.Fatalf("registered steps %v, Up runs %d", s.StepNames(), len(upSteps))
	}
	seen := map[string]bool{}
	for i, st := range s.Steps {
		if st.Name != upSteps[i].Name || !plugin.NameRE.MatchString(st.Name) || seen[st.Name] || st.Means == "" {
			t.Errorf("step %d: %+v: want a unique DNS label with a meaning, as Up runs it", i, st)
		}
		seen[st.Name] = true
	}
	if got := strings.Join(s.SkippableNames(), ","); got != "node-routes" {
		t.Errorf("skippable steps %s, want node-routes", got)
	}
	if got := strings.Join(s.ConditionNames(), ","); got != ConditionDNSReady {
		t.Errorf("conditions %s, want %s", got, ConditionDNSReady)
	}
}

// TestUpRefusesUnskippableStep: a skip of a step the cluster cannot do
// without is refused before anything is written, naming expansion and step.
func TestUpRefusesUnskippableStep(t *testing.T) {
	dir := t.TempDir()
	p, err := New(Options{StateDir: dir, ClusterName: "c"})
	if err != nil {
		t.Fatal(err)
	}
	for skip, want := range map[string]string{
		"control-plane": "expansion site skips step control-plane, which the cluster cannot do without (steps a site may skip: node-routes)",
		"no-such":       "expansion site skips step no-such, which the local provider does not have",
	} {
		_, err := p.Up(context.Background(), &provider.Desired{Model: model.New(), Skip: map[string]string{skip: "site"}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("skip %s: got %v, want %q", skip, err, want)
		}
	}
	if _, err := readState(dir); err != nil {
		t.Fatal(err)
	}
	if isStateDir(dir) {
		t.Error("a refused Up wrote the state directory")
	}
}

func TestHasDNSService(t *testing.T) {
	m := model.New()
	if hasDNSService(m) {
		t.Fatal("an empty model has no DNS")
	}
	m.Kubernetes.Objects = append(m.Kubernetes.Objects, model.Object{Object: map[string]any{"kind": "Service", "metadata": map[string]any{"name": "kube-dns", "namespace": "kube-system"}}})
	if !hasDNSService(m) {
		t.Fatal("the model's kube-system/kube-dns Service is not seen")
	}
}
