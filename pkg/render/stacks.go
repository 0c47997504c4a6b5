package render

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/kubeplug/kubeplug/pkg/model"
)

// Paths of the cloud deployment's files.
const (
	// CoreTemplatePath is the core stack's template.
	CoreTemplatePath = "cloud/template.json"
	// StacksPath lists the plugins' extra stacks (a StackIndex); written only
	// when a plugin contributes one.
	StacksPath = "cloud/stacks.json"
	// CoreStack is the name of the core stack; no plugin's stack may take it.
	CoreStack = "core"
)

// StackIndex is cloud/stacks.json: the plugins' extra CloudFormation stacks,
// sorted by name, each with its template at cloud/stacks/<name>.json.
type StackIndex struct {
	Stacks []StackEntry `json:"stacks"`
}

// StackEntry is one extra stack of StackIndex.
type StackEntry struct {
	Name string `json:"name"`
	// By is the plugin that contributed it.
	By string `json:"by"`
	// Template is the path of its template in the render.
	Template   string            `json:"template"`
	Parameters map[string]string `json:"parameters,omitempty"`
	// Inputs map parameters to other stacks' outputs, as STACK.OUTPUT.
	Inputs    map[string]string `json:"inputs,omitempty"`
	DependsOn []string          `json:"dependsOn,omitempty"`
}

// UserDataParameters maps each parameter of the core template that carries a
// pool's user data to the rendered file it is made from
// (nodes/<pool>/cloud-init.yaml). A deployer passes the file there.
func UserDataParameters(m *model.Model) map[string]string {
	out := map[string]string{}
	for _, name := range m.PoolNames() {
		out[CloudName(name)+"UserData"] = "nodes/" + name + "/cloud-init.yaml"
	}
	return out
}

var stackNameRE = regexp.MustCompile(`^[a-z][-a-z0-9]*[a-z0-9]$`)

// inputRE is STACK.OUTPUT.
var inputRE = regexp.MustCompile(`^([a-z][-a-z0-9]*[a-z0-9])\.([A-Za-z0-9]+)$`)

// stacks renders the plugins' extra stacks: each template to
// cloud/stacks/<name>.json and the list of them, with their parameters, inputs
// and dependencies, to cloud/stacks.json. A stack named core, an input that is
// not STACK.OUTPUT of a known stack, a dependency on an unknown stack and a
// template without resources are fatal, naming the plugin and the field.
func (r *renderer) stacks(context.Context) {
	m := r.in.Model
	if len(m.Cloud.Stacks) == 0 {
		return
	}
	var idx StackIndex
	for _, name := range sortedKeys(m.Cloud.Stacks) {
		s := m.Cloud.Stacks[name]
		field := "cloud.stacks." + name
		if !r.checkStack(m, name, s) {
			continue
		}
		b, err := json.Marshal(s.Value.Template)
		if err == nil {
			b, err = normalizeJSON(b)
		}
		if err != nil {
			r.fatalf(s.By, field+".template", "encoding the stack's template: %v", err)
			continue
		}
		path := "cloud/stacks/" + name + ".json"
		r.out[path] = b
		idx.Stacks = append(idx.Stacks, StackEntry{Name: name, By: s.By, Template: path, Parameters: s.Value.Parameters, Inputs: s.Value.Inputs, DependsOn: slices.Sorted(slices.Values(s.Value.DependsOn))})
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		r.fatalf("", "cloud.stacks", "encoding %s: %v", StacksPath, err)
		return
	}
	r.out[StacksPath] = append(b, '\n')
}

// checkStack reports, fatal, what is wrong with the plugins' stack name (s):
// its name, a template without resources, an input that is not STACK.OUTPUT
// of another stack, a dependency on a stack that is not another one. It says
// whether the stack is sound.
func (r *renderer) checkStack(m *model.Model, name string, s model.Setting[model.Stack]) bool {
	known := func(s string) bool { _, ok := m.Cloud.Stacks[s]; return ok || s == CoreStack }
	field := "cloud.stacks." + name
	ok := true
	if name == CoreStack || !stackNameRE.MatchString(name) {
		r.fatalf(s.By, field, "expected a stack name of lower-case letters, digits and '-' other than %q, found %q", CoreStack, name)
		ok = false
	}
	if res, _ := s.Value.Template["Resources"].(map[string]any); len(res) == 0 {
		r.fatalf(s.By, field+".template.Resources", "expected at least one resource in the stack's template")
		ok = false
	}
	for _, p := range sortedKeys(s.Value.Inputs) {
		in := s.Value.Inputs[p]
		sm := inputRE.FindStringSubmatch(in)
		switch {
		case sm == nil:
			r.fatalf(s.By, field+".inputs."+p, "expected STACK.OUTPUT such as core.VpcId, found %q", in)
			ok = false
		case sm[1] == name || !known(sm[1]):
			r.fatalf(s.By, field+".inputs."+p, "stack %s is not another stack of the cluster (expected %s)", sm[1], strings.Join(otherStacks(m, name), ", "))
			ok = false
		}
	}
	for _, d := range s.Value.DependsOn {
		if d == name || !known(d) {
			r.fatalf(s.By, field+".dependsOn", "stack %s is not another stack of the cluster (expected %s)", d, strings.Join(otherStacks(m, name), ", "))
			ok = false
		}
	}
	return ok
}

func otherStacks(m *model.Model, name string) []string {
	out := []string{CoreStack}
	for _, s := range sortedKeys(m.Cloud.Stacks) {
		if s != name {
			out = append(out, s)
		}
	}
	return out
}

// ParseStackIndex decodes cloud/stacks.json.
func ParseStackIndex(b []byte) (*StackIndex, error) {
	var idx StackIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("read %s: %w", StacksPath, err)
	}
	return &idx, nil
}
