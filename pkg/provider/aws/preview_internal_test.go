package aws

import (
	"strings"
	"testing"
)

// TestPreviewValues: a preview gives a stack the parameters Deploy would,
// inputs from the outputs of the stacks before it; an input whose stack does
// not exist yet gives a note naming it instead of values.
func TestPreviewValues(t *testing.T) {
	s := Stack{Name: "work", Parameters: map[string]string{"Size": "30"}, Inputs: map[string]OutputRef{"VpcId": {Stack: "core", Output: "VpcId"}}}
	values, note := previewValues(s, map[string]map[string]string{"core": {"VpcId": "vpc-1"}})
	if note != "" || len(values) != 2 || values["Size"] != "30" || values["VpcId"] != "vpc-1" {
		t.Errorf("with core deployed: %v, %q", values, note)
	}
	values, note = previewValues(s, map[string]map[string]string{})
	if values != nil || !strings.Contains(note, "parameter VpcId takes output VpcId of stack core, which does not exist yet") {
		t.Errorf("without core: %v, %q", values, note)
	}
}
