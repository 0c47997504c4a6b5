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
		if _, err := checkTemplate(s.label(), s.Template); err != nil {
			return out, err
		}
		name := d.StackName(s.Name)
		p := Preview{Name: s.Name, StackName: name}
		cur, err := d.describe(ctx, name)
		if err != nil {
			return out, err
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
			if err != nil {
				return out, err
			}
			out = append(out, p)
			continue
		}
		values := map[string]string{}
		for k, v := range s.Parameters {
			values[k] = v
		}
		for param, in := range s.Inputs {
			v, ok := outputs[in.Stack][in.Output]
			if !ok {
				p.Note = fmt.Sprintf("parameter %s takes output %s of stack %s, which does not exist yet: the changes are known once it is deployed", param, in.Output, in.Stack)
				break
			}
			values[param] = v
		}
		if p.Note != "" {
			out = append(out, p)
			continue
		}
		if len(s.Template) > maxTemplateBody {
			p.Note = fmt.Sprintf("the template is larger than %d bytes and is passed by URL: the preview does not upload it", maxTemplateBody)
			out = append(out, p)
			continue
		}
		csName := "kubeplug-preview-" + d.changeSetName(s, values)[len("kubeplug-"):]
		if err := d.createChangeSet(ctx, nil, s, name, csName, cfntypes.ChangeSetTypeUpdate, values); err != nil && !errors.Is(err, errNoChanges) {
			return out, err
		} else if err == nil {
			cs, changes, werr := d.waitChangeSet(ctx, name, csName)
			if cs != nil {
				err = d.deleteChangeSet(ctx, name, csName)
			}
			if werr != nil || err != nil {
				return out, errors.Join(werr, err)
			}
			p.Changes = changes
		}
		out = append(out, p)
	}
	st, err := d.State()
	if err != nil {
		return out, err
	}
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
