package aws

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/kubeplug/kubeplug/pkg/s3lite"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNoCredentials means the standard AWS chain found no credentials; the
	// error names every place it looked.
	ErrNoCredentials = errors.New("no AWS credentials found")
	// ErrNoRegion means neither the spec nor the standard chain names a region.
	ErrNoRegion = errors.New("no AWS region configured")
	// ErrStackFailed means a stack did not reach the state a change set or a
	// delete was to bring it to; the error names the failing resource and why.
	ErrStackFailed = errors.New("stack operation failed")
	// ErrNeedsOperator means a stack is in a state only a person can resolve
	// (UPDATE_ROLLBACK_FAILED, DELETE_FAILED); the error says the next step.
	ErrNeedsOperator = errors.New("stack needs an operator")
	// ErrTemplate means a template is invalid; the error names the resource or
	// the field.
	ErrTemplate = errors.New("invalid template")
)

// clients are the AWS service clients of one Deployer.
type clients struct {
	cfn    *cloudformation.Client
	s3     *s3lite.Client
	region string
	// endpoint is the endpoint override (Options.Endpoint, else
	// AWS_ENDPOINT_URL), empty for AWS's own endpoints.
	endpoint string
}

// newClients loads the standard AWS configuration chain (environment, shared
// files and profiles, SSO, web identity, container and instance credentials)
// with o's region, profile and endpoint, and checks that it yields credentials,
// so that a missing one fails before anything is changed.
func newClients(ctx context.Context, o Options) (*clients, error) {
	load := []func(*config.LoadOptions) error{
		// The SDK's own retries (3 attempts, with backoff) within CallTimeout.
		config.WithRetryMaxAttempts(3),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(o.CallTimeout)),
	}
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	if o.Profile != "" {
		load = append(load, config.WithSharedConfigProfile(o.Profile))
	}
	if o.Endpoint != "" {
		load = append(load, config.WithBaseEndpoint(o.Endpoint))
	}
	lctx, cancel := context.WithTimeout(ctx, o.CallTimeout)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(lctx, load...)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("%w: set spec.provider.aws.region, AWS_REGION or the region of profile %q", ErrNoRegion, profileName(o.Profile))
	}
	if _, err := cfg.Credentials.Retrieve(lctx); err != nil {
		return nil, fmt.Errorf("%w: looked in %s: %w", ErrNoCredentials, lookedAt(o.Profile), err)
	}
	endpoint := aws.ToString(cfg.BaseEndpoint)
	// Emulators and private endpoints rarely serve bucket.host names: on an
	// endpoint override s3lite addresses buckets path-style.
	s3c, err := s3lite.New(lctx, cfg, "")
	if err != nil {
		return nil, err
	}
	return &clients{
		region:   cfg.Region,
		endpoint: endpoint,
		cfn:      cloudformation.NewFromConfig(cfg),
		s3:       s3c,
	}, nil
}

// profileName is the profile the chain reads: the given one, AWS_PROFILE, default.
func profileName(p string) string {
	if p != "" {
		return p
	}
	if p = os.Getenv("AWS_PROFILE"); p != "" {
		return p
	}
	return "default"
}

// lookedAt names, in the chain's order, every place the standard AWS chain looks
// for credentials, with the files it reads on this machine.
func lookedAt(profile string) string {
	home, _ := os.UserHomeDir()
	creds := os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	if creds == "" {
		creds = filepath.Join(home, ".aws", "credentials")
	}
	conf := os.Getenv("AWS_CONFIG_FILE")
	if conf == "" {
		conf = filepath.Join(home, ".aws", "config")
	}
	places := []string{
		"the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
		fmt.Sprintf("profile %q of %s and %s (static keys, SSO, assumed roles, credential_process)", profileName(profile), creds, conf),
		"web identity (AWS_WEB_IDENTITY_TOKEN_FILE)",
		"the container credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI)",
	}
	if strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true") {
		places = append(places, "not the instance metadata service (AWS_EC2_METADATA_DISABLED=true)")
	} else {
		places = append(places, "the EC2 instance metadata service")
	}
	return strings.Join(places, ", ")
}

// call runs one AWS API call under the call timeout, and says so when the
// timeout, not the caller, ended it.
func call[T any](ctx context.Context, d *Deployer, what string, f func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, d.opts.CallTimeout)
	defer cancel()
	start := time.Now()
	v, err := f(cctx)
	if err != nil && ctx.Err() == nil && (errors.Is(cctx.Err(), context.DeadlineExceeded) || isTimeout(err)) {
		return v, fmt.Errorf("%s: no answer from %s within %s: %w", what, d.endpointName(), time.Since(start).Round(time.Millisecond), err)
	}
	if err != nil {
		return v, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func (d *Deployer) endpointName() string {
	if d.c.endpoint != "" {
		return d.c.endpoint
	}
	return "AWS in " + d.c.region
}
