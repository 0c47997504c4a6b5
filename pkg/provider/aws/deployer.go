package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Stack is one CloudFormation stack of a cluster.
type Stack struct {
	// Name is the stack's short name, unique in the cluster: "core" for the
	// cluster's template, "<plugin>-<name>" for a plugin's stack. The
	// CloudFormation stack is StackPrefix + "-" + Name.
	Name string
	// Template is the template's JSON.
	Template []byte
	// Parameters are given values of the template's parameters.
	Parameters map[string]string
	// Inputs set parameters to outputs of other stacks of the cluster, which
	// then deploy first: parameter name -> output.
	Inputs map[string]OutputRef
	// DependsOn are stacks that deploy before this one (and are deleted after it).
	DependsOn []string
	// By names who contributed the stack (a plugin), for messages; empty for the core.
	By string
}

// label names a stack in messages: "stack queue (plugin queue)".
func (s Stack) label() string {
	if s.By == "" {
		return "stack " + s.Name
	}
	return "stack " + s.Name + " (plugin " + s.By + ")"
}

// OutputRef names one output of one stack.
type OutputRef struct {
	// Stack is the short name of the stack, Output the key of its output.
	Stack, Output string
}

// Asset is one rendered file uploaded to the bucket, keyed by its content's
// sha256 under StackPrefix + "/sha256/".
type Asset struct {
	// Path is the file's path in the render, such as nodes/workers/cloud-init.yaml.
	Path    string
	Content []byte
}

// Bundle is what Deploy deploys.
type Bundle struct {
	Assets []Asset
	Stacks []Stack
}

// Result says what a Deploy did.
type Result struct {
	// Uploaded and Existing count the assets uploaded now and those found in the
	// bucket already.
	Uploaded, Existing int
	// Assets map each asset's path to its s3:// URI.
	Assets map[string]string
	// Stacks in the order they were deployed.
	Stacks []StackResult
}

// StackResult is what Deploy did to one stack.
type StackResult struct {
	Name, StackName, StackID string
	// ChangeSet is the executed change set; empty when there were no changes.
	ChangeSet string
	// Changes are the change set's changes; none when the stack was unchanged.
	Changes []Change
	// Status is the stack's status at the end.
	Status string
	// Outputs of the stack by key.
	Outputs map[string]string
}

// Change is one resource change of a change set.
type Change struct {
	// Action is Add, Modify, Remove, Import or Dynamic.
	Action string `json:"action"`
	// LogicalID and Type name the resource.
	LogicalID string `json:"logicalID"`
	Type      string `json:"type"`
	// Replacement is True, False or Conditional for a Modify.
	Replacement string `json:"replacement,omitempty"`
	// Scope lists what changes: Properties, Tags, Metadata, ...
	Scope []string `json:"scope,omitempty"`
	// Details name the changed properties, as CloudFormation reports them.
	Details []string `json:"details,omitempty"`
}

// String is the change as one line of a diff: "+ Add AWS::EC2::VPC VPC".
func (c Change) String() string {
	sign := map[string]string{"Add": "+", "Remove": "-", "Modify": "~", "Import": ">"}[c.Action]
	if sign == "" {
		sign = "?"
	}
	s := fmt.Sprintf("%s %s %s %s", sign, c.Action, c.Type, c.LogicalID)
	var more []string
	if c.Replacement != "" && c.Action == "Modify" {
		more = append(more, "replacement: "+c.Replacement)
	}
	if len(c.Details) > 0 {
		more = append(more, strings.Join(c.Details, ", "))
	} else if len(c.Scope) > 0 {
		more = append(more, strings.Join(c.Scope, ", "))
	}
	if len(more) > 0 {
		s += " (" + strings.Join(more, "; ") + ")"
	}
	return s
}

// Deployer deploys one cluster's bundle and deletes what it deployed.
type Deployer struct {
	opts Options
	c    *clients
}

// New checks o, loads the standard AWS configuration and checks that it yields
// credentials and a region. It changes nothing.
func New(ctx context.Context, o Options) (*Deployer, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	c, err := newClients(ctx, o)
	if err != nil {
		return nil, err
	}
	return &Deployer{opts: o, c: c}, nil
}

// StackName is the CloudFormation name of the stack of a short name.
func (d *Deployer) StackName(name string) string { return d.opts.StackPrefix + "-" + name }

// State reads the deployer's state file.
func (d *Deployer) State() (*State, error) { return ReadState(d.opts.StateFile) }

func (d *Deployer) event(kind, stack, format string, args ...any) {
	if d.opts.Events != nil {
		d.opts.Events(Event{Time: time.Now(), Kind: kind, Stack: stack, Message: fmt.Sprintf(format, args...)})
	}
}

// Deploy uploads b's assets and deploys its stacks in dependency order, each
// through a change set whose changes are reported (Event kind "change") before it
// executes. An unchanged stack gets a change set without changes, which is
// reported ("no changes") and deleted. It stops at the first stack that fails,
// with an error naming the failing resource and its reason; the stacks deployed
// before it stay. A Deploy interrupted at any point (even killed) resumes on the
// next run: it waits for a stack operation still in progress, reuses a change
// set it created and did not execute, and replaces a stack whose creation rolled
// back. A recorded stack that b no longer has is deleted at the end.
func (d *Deployer) Deploy(ctx context.Context, b Bundle) (*Result, error) {
	if len(b.Stacks) == 0 {
		return nil, errNoStacks
	}
	stacks, err := order(b.Stacks)
	if err != nil {
		return nil, err
	}
	if err := d.checkStacks(stacks); err != nil {
		return nil, err
	}
	st, err := d.State()
	if err != nil {
		return nil, err
	}
	if st.Bucket != "" && st.Bucket != d.opts.Bucket {
		return nil, fmt.Errorf("spec.provider.aws.bucket: the cluster's files are in bucket %s, not %s; run kubeplug down first to move them", st.Bucket, d.opts.Bucket)
	}
	st.Region, st.Bucket = d.c.region, d.opts.Bucket
	res := &Result{Assets: map[string]string{}}
	if err := d.upload(ctx, st, b.Assets, res); err != nil {
		return res, err
	}
	outputs := map[string]map[string]string{}
	for _, s := range stacks {
		values, err := stackValues(s, outputs)
		if err != nil {
			return res, err
		}
		sr, err := d.deployStack(ctx, st, s, values)
		if sr != nil {
			res.Stacks = append(res.Stacks, *sr)
			outputs[s.Name] = sr.Outputs
		}
		if werr := st.write(d.opts.StateFile); werr != nil {
			err = errors.Join(err, werr)
		}
		if err != nil {
			return res, err
		}
	}
	return res, d.prune(ctx, st, stacks)
}

// checkStacks refuses, before anything is deployed, a stack whose name is
// not a stack name, whose template does not check, or that gives a value to
// a parameter its template does not declare.
func (d *Deployer) checkStacks(stacks []Stack) error {
	for _, s := range stacks {
		if !stackNameRE.MatchString(s.Name) || len(d.StackName(s.Name)) > 128 {
			return fmt.Errorf("stack %q: expected a name of letters, digits and '-' starting with a letter, at most %d characters", s.Name, 127-len(d.opts.StackPrefix))
		}
		params, err := checkTemplate(s.label(), s.Template)
		if err != nil {
			return err
		}
		for _, p := range append(sortedKeys(s.Parameters), sortedKeys(s.Inputs)...) {
			if !slices.Contains(params, p) {
				return fmt.Errorf("%w: %s: parameter %s is given a value but the template declares no such parameter (it declares %s)", ErrTemplate, s.label(), p, orNone(params))
			}
		}
	}
	return nil
}

// stackValues are the parameter values of stack s: its own, and its inputs
// taken from the outputs of the stacks deployed before it.
func stackValues(s Stack, outputs map[string]map[string]string) (map[string]string, error) {
	values := map[string]string{}
	for k, v := range s.Parameters {
		values[k] = v
	}
	for _, p := range sortedKeys(s.Inputs) {
		in := s.Inputs[p]
		v, ok := outputs[in.Stack][in.Output]
		if !ok {
			return nil, fmt.Errorf("%s: parameter %s takes output %s of stack %s, which has no such output (it has %s)", s.label(), p, in.Output, in.Stack, orNone(sortedKeys(outputs[in.Stack])))
		}
		values[p] = v
	}
	return values, nil
}

// prune deletes the recorded stacks that the bundle no longer has (a plugin that
// contributed one was disabled), the last deployed first.
func (d *Deployer) prune(ctx context.Context, st *State, keep []Stack) error {
	for i := len(st.Stacks) - 1; i >= 0; i-- {
		s := st.Stacks[i]
		if slices.ContainsFunc(keep, func(k Stack) bool { return k.Name == s.Name }) {
			continue
		}
		d.event("stack", s.StackName, "no longer in the render (its plugin is gone); deleting")
		id := s.StackID
		if id == "" {
			id = s.StackName
		}
		cur, err := d.describe(ctx, id)
		if err != nil {
			return err
		}
		if cur != nil {
			if err := d.deleteStack(ctx, s.StackName, aws.ToString(cur.StackId)); err != nil {
				return err
			}
		}
		st.Stacks = slices.Delete(st.Stacks, i, i+1)
		if err := st.write(d.opts.StateFile); err != nil {
			return err
		}
	}
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// digest is the hex sha256 of b.
func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// changeSetName names the change set of a stack's template, parameters and tags:
// the same input gives the same name, so a re-run finds the change set an
// interrupted run left.
func (d *Deployer) changeSetName(s Stack, values map[string]string) string {
	h := sha256.New()
	h.Write(s.Template)
	for _, k := range sortedKeys(values) {
		_, _ = fmt.Fprintf(h, "\x00p %s=%s", k, values[k])
	}
	for _, k := range sortedKeys(d.opts.Tags) {
		_, _ = fmt.Fprintf(h, "\x00t %s=%s", k, d.opts.Tags[k])
	}
	return "kubeplug-" + hex.EncodeToString(h.Sum(nil))[:24]
}
