package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/smithy-go"
)

// maxTemplateBody is the largest template CloudFormation takes inline; a larger
// one is passed by its URL in the bucket.
const maxTemplateBody = 51200

// deployStack brings one stack to s with the given parameter values, through a
// change set, in three steps: settle what an earlier run left, make the change
// set, execute it. It records the stack in st as it goes.
func (d *Deployer) deployStack(ctx context.Context, st *State, s Stack, values map[string]string) (*StackResult, error) {
	name := d.StackName(s.Name)
	rec := st.stack(s.Name, name)
	rec.Reason = ""
	res := &StackResult{Name: s.Name, StackName: name}
	cur, err := d.settleStack(ctx, rec, name)
	if err != nil {
		return nil, err
	}
	csName := d.changeSetName(s, values)
	cs, changes, err := d.makeChangeSet(ctx, st, rec, s, cur, csName, values)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		// No changes: the stack is as the template says.
		d.event("change-set", name, "no changes")
		rec.ChangeSet = ""
		return d.finish(ctx, rec, res)
	}
	res.ChangeSet, res.Changes = csName, changes
	d.event("change-set", name, "change set %s: %d %s", csName, len(changes), plural(len(changes), "change", "changes"))
	for _, c := range changes {
		d.event("change", name, "%s", c)
	}
	if err := d.executeChangeSet(ctx, rec, name, csName, aws.ToString(cs.StackId)); err != nil {
		return nil, err
	}
	rec.ChangeSet = ""
	return d.finish(ctx, rec, res)
}

// settleStack returns the stack called name as a change set can start from:
// nil when there is none (or a failed creation was deleted), after waiting for
// what an interrupted run left in progress. A stack only an operator can
// repair is an error saying what to run.
func (d *Deployer) settleStack(ctx context.Context, rec *StackState, name string) (*cfntypes.Stack, error) {
	cur, err := d.describe(ctx, name)
	if err != nil || cur == nil {
		return nil, err
	}
	// Resume what an interrupted run left, or clear what a failed creation left.
	if inProgress(cur.StackStatus) {
		d.event("stack", name, "%s from an earlier run; waiting for it to settle", cur.StackStatus)
		if cur, err = d.wait(ctx, name, aws.ToString(cur.StackId), nil); err != nil && !errors.Is(err, ErrStackFailed) {
			return nil, err
		}
		if cur == nil {
			return nil, nil
		}
	}
	switch cur.StackStatus {
	case cfntypes.StackStatusRollbackComplete:
		// A creation that failed and rolled back leaves a stack that can only be deleted.
		d.event("stack", name, "ROLLBACK_COMPLETE: its creation failed earlier; deleting it to create it anew")
		if err := d.deleteStack(ctx, name, aws.ToString(cur.StackId)); err != nil {
			return nil, err
		}
		return nil, nil
	case cfntypes.StackStatusUpdateRollbackFailed:
		return nil, d.needsOperator(ctx, rec, cur, fmt.Sprintf(
			"CloudFormation could not roll the failed update back. Fix what blocks it (see the resource above), then run `aws cloudformation continue-update-rollback --stack-name %s` (add --resources-to-skip for resources that cannot be fixed) and, once the stack is UPDATE_ROLLBACK_COMPLETE, run kubeplug up again", name))
	case cfntypes.StackStatusRollbackFailed, cfntypes.StackStatusDeleteFailed:
		return nil, d.needsOperator(ctx, rec, cur, fmt.Sprintf(
			"delete the resources that block it, or run `aws cloudformation delete-stack --stack-name %s --retain-resources ...`, then run kubeplug up again", name))
	}
	return cur, nil
}

// makeChangeSet makes the change set csName that brings the stack from cur
// (nil: none yet) to s, or reuses one of that name an interrupted run made,
// records it in rec (written with st) and returns it with its changes; no change set (nil) when
// there is nothing to change.
func (d *Deployer) makeChangeSet(ctx context.Context, st *State, rec *StackState, s Stack, cur *cfntypes.Stack, csName string, values map[string]string) (*cloudformation.DescribeChangeSetOutput, []Change, error) {
	name := d.StackName(s.Name)
	csType := cfntypes.ChangeSetTypeUpdate
	if cur == nil || cur.StackStatus == cfntypes.StackStatusReviewInProgress {
		csType = cfntypes.ChangeSetTypeCreate
	}
	reuse := false
	if cur != nil {
		var err error
		if reuse, err = d.clearChangeSets(ctx, name, csName); err != nil {
			return nil, nil, err
		}
	}
	if !reuse {
		if err := d.createChangeSet(ctx, st, s, name, csName, csType, values); err != nil {
			if errors.Is(err, errNoChanges) {
				return nil, nil, nil
			}
			return nil, nil, err
		}
	}
	rec.ChangeSet = csName
	if err := st.write(d.opts.StateFile); err != nil {
		return nil, nil, err
	}
	cs, changes, err := d.waitChangeSet(ctx, name, csName)
	if errors.Is(err, errNoChanges) {
		return nil, nil, nil
	}
	return cs, changes, err
}

// executeChangeSet executes the change set csName of the stack called name
// (stackID) and waits for the stack to settle, reporting only the events
// after the ones already there; it records the outcome in rec.
func (d *Deployer) executeChangeSet(ctx context.Context, rec *StackState, name, csName, stackID string) error {
	seen, err := d.seenEvents(ctx, stackID)
	if err != nil {
		return err
	}
	if _, err := call(ctx, d, "execute change set "+csName+" of stack "+name, func(ctx context.Context) (*cloudformation.ExecuteChangeSetOutput, error) {
		return d.c.cfn.ExecuteChangeSet(ctx, &cloudformation.ExecuteChangeSetInput{StackName: aws.String(name), ChangeSetName: aws.String(csName)})
	}); err != nil {
		rec.Reason = err.Error()
		return fmt.Errorf("%w: stack %s: %w", ErrStackFailed, name, err)
	}
	final, err := d.wait(ctx, name, stackID, seen)
	if final != nil {
		rec.StackID, rec.Status = aws.ToString(final.StackId), string(final.StackStatus)
	}
	if err != nil {
		rec.Reason = err.Error()
	}
	return err
}

// finish records the settled stack's status and outputs.
func (d *Deployer) finish(ctx context.Context, rec *StackState, res *StackResult) (*StackResult, error) {
	cur, err := d.describe(ctx, res.StackName)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, fmt.Errorf("%w: stack %s disappeared", ErrStackFailed, res.StackName)
	}
	res.StackID, res.Status = aws.ToString(cur.StackId), string(cur.StackStatus)
	res.Outputs = map[string]string{}
	for _, o := range cur.Outputs {
		res.Outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	for _, k := range sortedKeys(res.Outputs) {
		d.event("output", res.StackName, "%s = %s", k, res.Outputs[k])
	}
	rec.StackID, rec.Status, rec.Outputs = res.StackID, res.Status, res.Outputs
	return res, nil
}

// needsOperator records and returns the error of a stack only a person can
// resolve, with the failing resources and the next step.
func (d *Deployer) needsOperator(ctx context.Context, rec *StackState, cur *cfntypes.Stack, next string) error {
	why := aws.ToString(cur.StackStatusReason)
	if evs, err := d.events(ctx, aws.ToString(cur.StackId), nil, 100); err == nil {
		if f := firstFailure(evs); f != "" {
			why = f
		}
	}
	err := fmt.Errorf("%w: stack %s is %s (%s): %s", ErrNeedsOperator, aws.ToString(cur.StackName), cur.StackStatus, why, next)
	rec.StackID, rec.Status, rec.Reason = aws.ToString(cur.StackId), string(cur.StackStatus), err.Error()
	return err
}

// describe returns the stack of a name or ID, nil when none exists.
func (d *Deployer) describe(ctx context.Context, name string) (*cfntypes.Stack, error) {
	out, err := call(ctx, d, "describe stack "+name, func(ctx context.Context) (*cloudformation.DescribeStacksOutput, error) {
		return d.c.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	})
	if isStackMissing(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(out.Stacks) == 0 || out.Stacks[0].StackStatus == cfntypes.StackStatusDeleteComplete {
		return nil, nil
	}
	return &out.Stacks[0], nil
}

func isStackMissing(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && strings.Contains(ae.ErrorMessage(), "does not exist")
}

func inProgress(s cfntypes.StackStatus) bool {
	return strings.HasSuffix(string(s), "_IN_PROGRESS") && s != cfntypes.StackStatusReviewInProgress
}

// clearChangeSets deletes the change sets kubeplug left on a stack, but for one
// named keep that can still execute: reuse says it is there.
func (d *Deployer) clearChangeSets(ctx context.Context, stack, keep string) (reuse bool, err error) {
	var token *string
	for {
		out, err := call(ctx, d, "list the change sets of stack "+stack, func(ctx context.Context) (*cloudformation.ListChangeSetsOutput, error) {
			return d.c.cfn.ListChangeSets(ctx, &cloudformation.ListChangeSetsInput{StackName: aws.String(stack), NextToken: token})
		})
		if err != nil {
			return false, err
		}
		for _, cs := range out.Summaries {
			n := aws.ToString(cs.ChangeSetName)
			if !strings.HasPrefix(n, "kubeplug-") || cs.ExecutionStatus == cfntypes.ExecutionStatusExecuteComplete {
				continue
			}
			if n == keep && cs.Status == cfntypes.ChangeSetStatusCreateComplete && cs.ExecutionStatus == cfntypes.ExecutionStatusAvailable {
				d.event("change-set", stack, "found change set %s that an earlier run created and did not execute", n)
				reuse = true
				continue
			}
			if err := d.deleteChangeSet(ctx, stack, n); err != nil {
				return false, err
			}
		}
		if token = out.NextToken; token == nil {
			return reuse, nil
		}
	}
}

func (d *Deployer) deleteChangeSet(ctx context.Context, stack, name string) error {
	_, err := call(ctx, d, "delete change set "+name+" of stack "+stack, func(ctx context.Context) (*cloudformation.DeleteChangeSetOutput, error) {
		return d.c.cfn.DeleteChangeSet(ctx, &cloudformation.DeleteChangeSetInput{StackName: aws.String(stack), ChangeSetName: aws.String(name)})
	})
	return err
}

// createChangeSet creates the change set of s; a template too large to pass
// inline is uploaded to the bucket and passed by URL.
func (d *Deployer) createChangeSet(ctx context.Context, st *State, s Stack, stack, csName string, typ cfntypes.ChangeSetType, values map[string]string) error {
	in := &cloudformation.CreateChangeSetInput{
		StackName:     aws.String(stack),
		ChangeSetName: aws.String(csName),
		ChangeSetType: typ,
		Description:   aws.String("kubeplug " + d.opts.ClusterName + " " + s.Name),
		Capabilities:  []cfntypes.Capability{cfntypes.CapabilityCapabilityIam, cfntypes.CapabilityCapabilityNamedIam},
		Tags: []cfntypes.Tag{
			{Key: aws.String("kubeplug.dev/cluster"), Value: aws.String(d.opts.ClusterName)},
			{Key: aws.String("kubeplug.dev/stack"), Value: aws.String(s.Name)},
		},
	}
	for _, k := range sortedKeys(d.opts.Tags) {
		in.Tags = append(in.Tags, cfntypes.Tag{Key: aws.String(k), Value: aws.String(d.opts.Tags[k])})
	}
	for _, k := range sortedKeys(values) {
		in.Parameters = append(in.Parameters, cfntypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(values[k])})
	}
	if len(s.Template) <= maxTemplateBody {
		in.TemplateBody = aws.String(string(s.Template))
	} else {
		res := &Result{Assets: map[string]string{}}
		if err := d.upload(ctx, st, []Asset{{Path: "cloud/" + s.Name + ".json", Content: s.Template}}, res); err != nil {
			return err
		}
		in.TemplateURL = aws.String(fmt.Sprintf("https://%s.s3.%s.amazonaws.com/%s", d.opts.Bucket, d.c.region, d.objectKey(s.Template)))
	}
	_, err := call(ctx, d, "create change set "+csName+" of stack "+stack, func(ctx context.Context) (*cloudformation.CreateChangeSetOutput, error) {
		return d.c.cfn.CreateChangeSet(ctx, in)
	})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && isNoChange(ae.ErrorMessage()) {
			return errNoChanges
		}
		if errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" {
			return fmt.Errorf("%w: stack %s: CloudFormation rejected the template: %s", ErrTemplate, stack, ae.ErrorMessage())
		}
		return err
	}
	return nil
}

// waitChangeSet waits until the change set is created and returns it with its
// changes; a change set without changes is deleted and returned as nil.
func (d *Deployer) waitChangeSet(ctx context.Context, stack, name string) (*cloudformation.DescribeChangeSetOutput, []Change, error) {
	deadline := time.Now().Add(d.opts.StackTimeout)
	for {
		first, changes, err := d.describeChangeSet(ctx, stack, name)
		if err != nil {
			return nil, nil, err
		}
		switch first.Status {
		case cfntypes.ChangeSetStatusCreateComplete:
			return first, changes, nil
		case cfntypes.ChangeSetStatusFailed:
			reason := aws.ToString(first.StatusReason)
			derr := d.deleteChangeSet(ctx, stack, name)
			if isNoChange(reason) {
				return nil, nil, derr
			}
			return nil, nil, errors.Join(fmt.Errorf("%w: stack %s: change set %s failed: %s", ErrTemplate, stack, name, reason), derr)
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("change set %s of stack %s is still %s after %s", name, stack, first.Status, d.opts.StackTimeout)
		}
		if err := sleep(ctx, d.opts.PollInterval); err != nil {
			return nil, nil, err
		}
	}
}

// describeChangeSet describes the change set: its first page, and, once it
// is created, the changes of all its pages.
func (d *Deployer) describeChangeSet(ctx context.Context, stack, name string) (*cloudformation.DescribeChangeSetOutput, []Change, error) {
	var changes []Change
	var first *cloudformation.DescribeChangeSetOutput
	var token *string
	for {
		out, err := call(ctx, d, "describe change set "+name+" of stack "+stack, func(ctx context.Context) (*cloudformation.DescribeChangeSetOutput, error) {
			return d.c.cfn.DescribeChangeSet(ctx, &cloudformation.DescribeChangeSetInput{StackName: aws.String(stack), ChangeSetName: aws.String(name), NextToken: token})
		})
		if err != nil {
			return nil, nil, err
		}
		if first == nil {
			first = out
		}
		for _, c := range out.Changes {
			if rc := c.ResourceChange; rc != nil {
				changes = append(changes, resourceChange(rc))
			}
		}
		if token = out.NextToken; token == nil || first.Status != cfntypes.ChangeSetStatusCreateComplete {
			return first, changes, nil
		}
	}
}

// resourceChange is a change set's change of one resource: its action,
// replacement, scope and the attributes it changes, sorted.
func resourceChange(rc *cfntypes.ResourceChange) Change {
	ch := Change{Action: string(rc.Action), LogicalID: aws.ToString(rc.LogicalResourceId), Type: aws.ToString(rc.ResourceType), Replacement: string(rc.Replacement)}
	for _, s := range rc.Scope {
		ch.Scope = append(ch.Scope, string(s))
	}
	for _, det := range rc.Details {
		if det.Target != nil && det.Target.Name != nil {
			ch.Details = append(ch.Details, string(det.Target.Attribute)+"."+aws.ToString(det.Target.Name))
		}
	}
	slices.Sort(ch.Details)
	ch.Details = slices.Compact(ch.Details)
	return ch
}

// errNoChanges says that CloudFormation refused a change set because it would
// change nothing (some endpoints say so when it is created, others make a
// FAILED change set).
var errNoChanges = errors.New("no changes")

func isNoChange(reason string) bool {
	return strings.Contains(reason, "didn't contain changes") || strings.Contains(reason, "No updates are to be performed")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func sleep(ctx context.Context, dt time.Duration) error {
	t := time.NewTimer(dt)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// seenEvents returns the IDs of the stack's events so far, so that waiting
// streams only the new ones.
func (d *Deployer) seenEvents(ctx context.Context, stackID string) (map[string]bool, error) {
	evs, err := d.events(ctx, stackID, nil, 1000)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, e := range evs {
		seen[aws.ToString(e.EventId)] = true
	}
	return seen, nil
}

// events returns the stack's events newer than any in seen, oldest first, at
// most max of them. CloudFormation lists the newest first, so paging stops at
// the first event already seen.
func (d *Deployer) events(ctx context.Context, stackID string, seen map[string]bool, limit int) ([]cfntypes.StackEvent, error) {
	var out []cfntypes.StackEvent
	var token *string
	for {
		page, err := call(ctx, d, "read the events of stack "+stackID, func(ctx context.Context) (*cloudformation.DescribeStackEventsOutput, error) {
			return d.c.cfn.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: aws.String(stackID), NextToken: token})
		})
		if isStackMissing(err) {
			break
		}
		if err != nil {
			return nil, err
		}
		stop := false
		for _, e := range page.StackEvents {
			if seen[aws.ToString(e.EventId)] || len(out) >= limit {
				stop = true
				break
			}
			out = append(out, e)
		}
		if token = page.NextToken; stop || token == nil {
			break
		}
	}
	slices.Reverse(out)
	return out, nil
}

// firstFailure describes the first resource failure among events (oldest
// first), the root cause: later ones are mostly "cancelled" because of it.
func firstFailure(evs []cfntypes.StackEvent) string {
	var fallback string
	for _, e := range evs {
		if !strings.HasSuffix(string(e.ResourceStatus), "_FAILED") {
			continue
		}
		reason := aws.ToString(e.ResourceStatusReason)
		f := fmt.Sprintf("resource %s (%s) %s: %s", aws.ToString(e.LogicalResourceId), aws.ToString(e.ResourceType), e.ResourceStatus, reason)
		if aws.ToString(e.ResourceType) == "AWS::CloudFormation::Stack" || strings.Contains(strings.ToLower(reason), "cancelled") {
			if fallback == "" {
				fallback = f
			}
			continue
		}
		return f
	}
	return fallback
}

// wait streams the stack's new events until it settles, and returns the settled
// stack. A stack that did not reach the state the operation was for is an error
// wrapping ErrStackFailed naming the failing resource and its reason (and saying
// that CloudFormation rolled back), or ErrNeedsOperator when the rollback failed.
func (d *Deployer) wait(ctx context.Context, name, stackID string, seen map[string]bool) (*cfntypes.Stack, error) {
	if seen == nil {
		var err error
		if seen, err = d.seenEvents(ctx, stackID); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(d.opts.StackTimeout)
	var all []cfntypes.StackEvent
	for {
		evs, err := d.events(ctx, stackID, seen, 1000)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			seen[aws.ToString(e.EventId)] = true
			all = append(all, e)
			msg := fmt.Sprintf("%s %s %s", aws.ToString(e.LogicalResourceId), aws.ToString(e.ResourceType), e.ResourceStatus)
			if r := aws.ToString(e.ResourceStatusReason); r != "" {
				msg += ": " + r
			}
			d.event("stack-event", name, "%s", msg)
		}
		cur, err := d.describe(ctx, stackID)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, nil // deleted
		}
		if !inProgress(cur.StackStatus) {
			return cur, d.settled(ctx, name, cur, all)
		}
		if time.Now().After(deadline) {
			return cur, fmt.Errorf("stack %s is still %s after %s; run kubeplug again to go on waiting", name, cur.StackStatus, d.opts.StackTimeout)
		}
		if err := sleep(ctx, d.opts.PollInterval); err != nil {
			return cur, fmt.Errorf("waiting for stack %s (%s): %w; run kubeplug again to go on waiting", name, cur.StackStatus, err)
		}
	}
}

// settled returns nil for a stack that reached a good state, else the error
// saying why it did not, from the events of the operation.
func (d *Deployer) settled(ctx context.Context, name string, cur *cfntypes.Stack, evs []cfntypes.StackEvent) error {
	switch cur.StackStatus {
	case cfntypes.StackStatusCreateComplete, cfntypes.StackStatusUpdateComplete, cfntypes.StackStatusImportComplete,
		cfntypes.StackStatusDeleteComplete, cfntypes.StackStatusReviewInProgress:
		return nil
	case cfntypes.StackStatusUpdateRollbackFailed, cfntypes.StackStatusRollbackFailed, cfntypes.StackStatusDeleteFailed:
		var rec StackState
		next := fmt.Sprintf("CloudFormation could not roll the failed update back. Fix what blocks it, then run `aws cloudformation continue-update-rollback --stack-name %s` (add --resources-to-skip for resources that cannot be fixed) and, once the stack is UPDATE_ROLLBACK_COMPLETE, run kubeplug up again", name)
		if cur.StackStatus != cfntypes.StackStatusUpdateRollbackFailed {
			next = fmt.Sprintf("delete the resources that block it, or run `aws cloudformation delete-stack --stack-name %s --retain-resources ...`, then run kubeplug again", name)
		}
		return d.needsOperator(ctx, &rec, cur, next)
	}
	why := firstFailure(evs)
	if why == "" {
		why = aws.ToString(cur.StackStatusReason)
	}
	rolled := ""
	switch cur.StackStatus {
	case cfntypes.StackStatusUpdateRollbackComplete:
		rolled = "; CloudFormation rolled the stack back to its previous template"
	case cfntypes.StackStatusRollbackComplete:
		rolled = "; CloudFormation rolled the creation back (the next run deletes the stack and creates it anew)"
	}
	return fmt.Errorf("%w: stack %s is %s: %s%s", ErrStackFailed, name, cur.StackStatus, why, rolled)
}

// deleteStack deletes a stack and waits until it is gone.
func (d *Deployer) deleteStack(ctx context.Context, name, stackID string) error {
	if stackID == "" {
		stackID = name
	}
	seen, err := d.seenEvents(ctx, stackID)
	if err != nil {
		return err
	}
	if _, err := call(ctx, d, "delete stack "+name, func(ctx context.Context) (*cloudformation.DeleteStackOutput, error) {
		return d.c.cfn.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(stackID)})
	}); err != nil && !isStackMissing(err) {
		return err
	}
	d.event("stack", name, "deleting")
	cur, err := d.wait(ctx, name, stackID, seen)
	if err != nil {
		return err
	}
	if cur != nil && cur.StackStatus != cfntypes.StackStatusDeleteComplete {
		return fmt.Errorf("%w: stack %s is %s after its deletion", ErrStackFailed, name, cur.StackStatus)
	}
	d.event("stack", name, "deleted")
	return nil
}

// Destroy deletes what the state file records this cluster created: the stacks
// in reverse deployment order, the objects it uploaded, and the bucket when it
// created it and nothing else is in it. It leaves everything else. What it
// deleted leaves the state file as it goes, so an interrupted Destroy resumes;
// once everything is gone the state file is removed. Destroy without a state
// file does nothing.
func (d *Deployer) Destroy(ctx context.Context) error {
	st, err := d.State()
	if err != nil {
		return err
	}
	for i := len(st.Stacks) - 1; i >= 0; i-- {
		if err := d.destroyStack(ctx, st.Stacks[i]); err != nil {
			return err
		}
		st.Stacks = st.Stacks[:i]
		if err := st.write(d.opts.StateFile); err != nil {
			return err
		}
	}
	if err := d.deleteObjects(ctx, st); err != nil {
		return err
	}
	if err := st.write(d.opts.StateFile); err != nil {
		return err
	}
	if len(st.Stacks) == 0 && len(st.Objects) == 0 && !st.BucketCreated {
		return removeState(d.opts.StateFile)
	}
	return nil
}

// destroyStack deletes the recorded stack s, if it is still there, after
// waiting for an operation of an earlier run still in progress on it.
func (d *Deployer) destroyStack(ctx context.Context, s StackState) error {
	id := s.StackID
	if id == "" {
		id = s.StackName
	}
	cur, err := d.describe(ctx, id)
	if err != nil || cur == nil {
		return err
	}
	if inProgress(cur.StackStatus) && cur.StackStatus != cfntypes.StackStatusDeleteInProgress {
		d.event("stack", s.StackName, "%s from an earlier run; waiting for it to settle before deleting", cur.StackStatus)
		if _, err := d.wait(ctx, s.StackName, aws.ToString(cur.StackId), nil); err != nil && !errors.Is(err, ErrStackFailed) {
			return err
		}
	}
	return d.deleteStack(ctx, s.StackName, aws.ToString(cur.StackId))
}
