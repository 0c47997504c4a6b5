package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
)

// Preview is what Deploy would do to one stack.
type Preview struct {
	Name, StackName string
	// Exists is whether the stack exists now.
	Exists bool
	// Changes are the changes a Deploy would make: those of a change set created
	// for the preview and deleted right after, or, for a stack that does not
	// exist yet, an Add of every resource of its template.
	Changes []Change
	// Note says why the changes are incomplete or unknown, empty when they are not.
	Note string
}

// Preview says what Deploy would change, changing nothing that Deploy would:
// for each existing stack, in dependency order, it creates a change set with the
// template and parameters Deploy would use, reads its changes and deletes it; a
// stack that does not exist yet lists its template's resources as Adds (a
// CREATE change set would leave an empty stack behind). Inputs take the current
// outputs of the stacks they name; a stack whose inputs name a stack that does
// not exist yet is listed with a note instead, and so is a recorded stack the
// bundle no longer has, which Deploy would delete. Nothing is uploaded.
func (d *Deployer) Preview(ctx context.Context, b Bundle) ([]Preview, error) {
	if len(b.Stacks) == 0 {
		return nil, errNoStacks
	}
	stacks, err := order(b.Stacks)
	if err != nil {
		return nil, err
	}
	outputs := map[string]map[string]string{}
	var out []Preview
	for _, s := range stacks {
		p, err := d.previewStack(ctx, s, outputs)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	removed, err := d.previewRemoved(stacks)
	return append(out, removed...), err
}

// previewStack is the preview of one stack of the bundle, its inputs taken
// from outputs (the current outputs of the stacks before it, to which it adds
// its own).
func (d *Deployer) previewStack(ctx context.Context, s Stack, outputs map[string]map[string]string) (Preview, error) {
	if _, err := checkTemplate(s.label(), s.Template); err != nil {
		return Preview{}, err
	}
	name := d.StackName(s.Name)
	p := Preview{Name: s.Name, StackName: name}
	cur, err := d.describe(ctx, name)
	if err != nil {
		return p, err
	}
	p.Exists = cur != nil && cur.StackStatus != cfntypes.StackStatusReviewInProgress
	if cur != nil {
		outputs[s.Name] = map[string]string{}
		for _, o := range cur.Outputs {
			outputs[s.Name][aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
		}
	}
	if !p.Exists {
		p.Changes, err = templateAdds(s.Template)
		return p, err
	}
	values, note := previewValues(s, outputs)
	switch {
	case note != "":
		p.Note = note
	case len(s.Template) > maxTemplateBody:
		p.Note = fmt.Sprintf("the template is larger than %d bytes and is passed by URL: the preview does not upload it", maxTemplateBody)
	default:
		p.Changes, err = d.previewChanges(ctx, s, name, values)
	}
	return p, err
}

// previewValues are the parameter values Deploy would give s, its inputs
// from outputs; or a note naming the first input whose stack does not exist
// yet.
func previewValues(s Stack, outputs map[string]map[string]string) (map[string]string, string) {
	values := map[string]string{}
	for k, v := range s.Parameters {
		values[k] = v
	}
	for param, in := range s.Inputs {
		v, ok := outputs[in.Stack][in.Output]
		if !ok {
			return nil, fmt.Sprintf("parameter %s takes output %s of stack %s, which does not exist yet: the changes are known once it is deployed", param, in.Output, in.Stack)
		}
		values[param] = v
	}
	return values, ""
}

// previewChanges are the changes of an update of the existing stack called
// name to s with values: a change set created, read and deleted.
func (d *Deployer) previewChanges(ctx context.Context, s Stack, name string, values map[string]string) ([]Change, error) {
	csName := "kubeplug-preview-" + d.changeSetName(s, values)[len("kubeplug-"):]
	err := d.createChangeSet(ctx, nil, s, name, csName, cfntypes.ChangeSetTypeUpdate, values)
	if errors.Is(err, errNoChanges) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cs, changes, werr := d.waitChangeSet(ctx, name, csName)
	if cs != nil {
		err = d.deleteChangeSet(ctx, name, csName)
	}
	if werr != nil || err != nil {
		return nil, errors.Join(werr, err)
	}
	return changes, nil
}

// previewRemoved are the recorded stacks the bundle no longer has, which
// Deploy would delete, latest first.
func (d *Deployer) previewRemoved(stacks []Stack) ([]Preview, error) {
	st, err := d.State()
	if err != nil {
		return nil, err
	}
	var out []Preview
	for i := len(st.Stacks) - 1; i >= 0; i-- {
		s := st.Stacks[i]
		if !slices.ContainsFunc(stacks, func(k Stack) bool { return k.Name == s.Name }) {
			out = append(out, Preview{Name: s.Name, StackName: s.StackName, Exists: true, Note: "no longer in the render (its plugin is gone): up deletes the stack"})
		}
	}
	return out, nil
}

// templateAdds lists a template's resources as Adds, by logical ID.
func templateAdds(body []byte) ([]Change, error) {
	var t struct {
		Resources map[string]struct {
			Type string `json:"Type"`
		} `json:"Resources"`
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, fmt.Errorf("read the template: %w", err)
	}
	var out []Change
	for _, id := range sortedKeys(t.Resources) {
		out = append(out, Change{Action: "Add", LogicalID: id, Type: t.Resources[id].Type})
	}
	return out, nil
}
