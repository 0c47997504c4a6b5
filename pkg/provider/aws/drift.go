package aws

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/smithy-go"
)

// ErrDriftUnsupported means the endpoint does not detect drift (emulators).
var ErrDriftUnsupported = errors.New("the endpoint does not detect stack drift")

// StackDrift is what CloudFormation's drift detection found in one stack.
type StackDrift struct {
	Name, StackName string
	// Status is IN_SYNC, DRIFTED or NOT_CHECKED.
	Status string
	// Resources are the resources that were modified or deleted outside
	// CloudFormation.
	Resources []ResourceDrift
}

// ResourceDrift is one drifted resource.
type ResourceDrift struct {
	LogicalID, Type string
	// Status is MODIFIED or DELETED.
	Status string
	// Properties are the changed properties: "PATH: expected E, actual A".
	Properties []string
}

// Drift runs CloudFormation's drift detection on every stack the state file
// records and returns what changed outside CloudFormation. An endpoint that does
// not detect drift is an error wrapping ErrDriftUnsupported that says so.
func (d *Deployer) Drift(ctx context.Context) ([]StackDrift, error) {
	st, err := d.State()
	if err != nil {
		return nil, err
	}
	var out []StackDrift
	for _, s := range st.Stacks {
		sd, err := d.stackDrift(ctx, s)
		if err != nil {
			return out, err
		}
		out = append(out, sd)
	}
	return out, nil
}

func (d *Deployer) stackDrift(ctx context.Context, s StackState) (StackDrift, error) {
	sd := StackDrift{Name: s.Name, StackName: s.StackName}
	det, err := call(ctx, d, "detect the drift of stack "+s.StackName, func(ctx context.Context) (*cloudformation.DetectStackDriftOutput, error) {
		return d.c.cfn.DetectStackDrift(ctx, &cloudformation.DetectStackDriftInput{StackName: aws.String(s.StackName)})
	})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() != "InternalFailure" {
			return sd, err
		}
		// No answer the API defines (moto answers HTTP 500 with a page of HTML).
		return sd, fmt.Errorf("%w: %s: %w", ErrDriftUnsupported, d.endpointName(), err)
	}
	deadline := time.Now().Add(d.opts.StackTimeout)
	for {
		st, err := call(ctx, d, "read the drift detection of stack "+s.StackName, func(ctx context.Context) (*cloudformation.DescribeStackDriftDetectionStatusOutput, error) {
			return d.c.cfn.DescribeStackDriftDetectionStatus(ctx, &cloudformation.DescribeStackDriftDetectionStatusInput{StackDriftDetectionId: det.StackDriftDetectionId})
		})
		if err != nil {
			return sd, err
		}
		if st.DetectionStatus == cfntypes.StackDriftDetectionStatusDetectionFailed {
			return sd, fmt.Errorf("drift detection of stack %s failed: %s", s.StackName, aws.ToString(st.DetectionStatusReason))
		}
		if st.DetectionStatus == cfntypes.StackDriftDetectionStatusDetectionComplete {
			sd.Status = string(st.StackDriftStatus)
			break
		}
		if time.Now().After(deadline) {
			return sd, fmt.Errorf("drift detection of stack %s still running after %s", s.StackName, d.opts.StackTimeout)
		}
		if err := sleep(ctx, d.opts.PollInterval); err != nil {
			return sd, err
		}
	}
	var token *string
	for {
		page, err := call(ctx, d, "read the drifted resources of stack "+s.StackName, func(ctx context.Context) (*cloudformation.DescribeStackResourceDriftsOutput, error) {
			return d.c.cfn.DescribeStackResourceDrifts(ctx, &cloudformation.DescribeStackResourceDriftsInput{
				StackName:                       aws.String(s.StackName),
				StackResourceDriftStatusFilters: []cfntypes.StackResourceDriftStatus{cfntypes.StackResourceDriftStatusModified, cfntypes.StackResourceDriftStatusDeleted},
				NextToken:                       token,
			})
		})
		if err != nil {
			return sd, err
		}
		for _, r := range page.StackResourceDrifts {
			rd := ResourceDrift{LogicalID: aws.ToString(r.LogicalResourceId), Type: aws.ToString(r.ResourceType), Status: string(r.StackResourceDriftStatus)}
			for _, p := range r.PropertyDifferences {
				rd.Properties = append(rd.Properties, fmt.Sprintf("%s: expected %s, actual %s", aws.ToString(p.PropertyPath), aws.ToString(p.ExpectedValue), aws.ToString(p.ActualValue)))
			}
			sd.Resources = append(sd.Resources, rd)
		}
		if token = page.NextToken; token == nil {
			return sd, nil
		}
	}
}
