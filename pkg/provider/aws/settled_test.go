package aws

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/kubeplug/kubeplug/test/harness/testaws"
)

// TestSettled checks what a settled stack's status becomes: the states moto
// never reaches (failed resources, rollbacks, a failed rollback) are given as
// CloudFormation reports them, on a real stack of the emulator.
func TestSettled(t *testing.T) {
	srv := testaws.Start(t)
	testaws.Env(t)
	d, err := New(t.Context(), Options{ClusterName: "s", Endpoint: srv.Endpoint, Bucket: "settled-1", StateFile: filepath.Join(t.TempDir(), "s.json"), PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Deploy(t.Context(), Bundle{Stacks: []Stack{{Name: "core", Template: []byte(`{"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Stacks[0].StackID
	event := func(id, typ, status, reason string) cfntypes.StackEvent {
		return cfntypes.StackEvent{LogicalResourceId: aws.String(id), ResourceType: aws.String(typ), ResourceStatus: cfntypes.ResourceStatus(status), ResourceStatusReason: aws.String(reason)}
	}
	failed := []cfntypes.StackEvent{
		event("s-core", "AWS::CloudFormation::Stack", "UPDATE_IN_PROGRESS", "User Initiated"),
		event("Subnet0", "AWS::EC2::Subnet", "UPDATE_FAILED", "The CIDR '10.9.0.0/24' is invalid."),
		event("Queue", "AWS::SQS::Queue", "UPDATE_FAILED", "Resource update cancelled"),
	}
	for _, tc := range []struct {
		status cfntypes.StackStatus
		evs    []cfntypes.StackEvent
		is     error
		want   []string
	}{
		{status: cfntypes.StackStatusUpdateComplete},
		{status: cfntypes.StackStatusUpdateRollbackComplete, evs: failed, is: ErrStackFailed, want: []string{
			"stack s-core is UPDATE_ROLLBACK_COMPLETE: resource Subnet0 (AWS::EC2::Subnet) UPDATE_FAILED: The CIDR '10.9.0.0/24' is invalid.",
			"rolled the stack back to its previous template",
		}},
		{status: cfntypes.StackStatusRollbackComplete, evs: failed[:2], is: ErrStackFailed, want: []string{"resource Subnet0", "the next run deletes the stack and creates it anew"}},
		{status: cfntypes.StackStatusUpdateRollbackFailed, is: ErrNeedsOperator, want: []string{
			"stack s-core is UPDATE_ROLLBACK_FAILED", "aws cloudformation continue-update-rollback --stack-name s-core", "--resources-to-skip", "run kubeplug up again",
		}},
		{status: cfntypes.StackStatusDeleteFailed, is: ErrNeedsOperator, want: []string{"delete-stack --stack-name s-core --retain-resources"}},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			cur := &cfntypes.Stack{StackName: aws.String("s-core"), StackId: aws.String(id), StackStatus: tc.status}
			err := d.settled(t.Context(), "s-core", cur, tc.evs)
			if tc.is == nil {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v, want %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if err := d.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
}
