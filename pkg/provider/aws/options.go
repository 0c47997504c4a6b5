package aws

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"
)

// Options configure a Deployer. Zero fields take the defaults documented on each;
// New validates them once.
type Options struct {
	// ClusterName names the cluster; it is tagged on every stack. Required.
	ClusterName string
	// Region is the AWS region. Default: the standard chain's (AWS_REGION, the
	// profile's region).
	Region string
	// Profile is a named profile of the shared configuration files. Default: the
	// standard chain's (AWS_PROFILE, else "default").
	Profile string
	// Endpoint overrides the URL of every AWS service (S3 addressed path-style),
	// for emulators and private endpoints. Default: AWS's own endpoints.
	Endpoint string
	// Bucket is the S3 bucket the rendered files go to. It is created when
	// missing (and then deleted by Destroy once empty). Required.
	Bucket string
	// StackPrefix starts the name of every stack and of every object key this
	// cluster owns. Default "kubeplug-" + ClusterName.
	StackPrefix string
	// Tags are put on every stack (CloudFormation propagates them to the stacks'
	// resources), after kubeplug's own kubeplug.dev/cluster and kubeplug.dev/stack.
	Tags map[string]string
	// StateFile is where the Deployer records what it created (stacks, uploaded
	// objects, the bucket) and the stacks' outputs. Required.
	StateFile string
	// Events receives progress: change sets, stack events, uploads. None when nil.
	Events func(Event)
	// Logger receives diagnostics; discarded when nil.
	Logger *slog.Logger
	// CallTimeout bounds one AWS API call, retries included. Default 30s.
	CallTimeout time.Duration
	// StackTimeout bounds the wait for one stack to settle after a change set
	// executes or a delete starts. Default 45m.
	StackTimeout time.Duration
	// PollInterval is how often a waiting Deployer reads the stack's status and
	// new events. Default 5s.
	PollInterval time.Duration
}

// Defaults of Options.
const (
	DefaultCallTimeout  = 30 * time.Second
	DefaultStackTimeout = 45 * time.Minute
	DefaultPollInterval = 5 * time.Second
)

// Event is one step of progress. Kind is a constant: "asset", "change-set",
// "change", "stack-event", "stack", "output".
type Event struct {
	Time time.Time
	Kind string
	// Stack is the CloudFormation stack the event is about, empty for assets.
	Stack   string
	Message string
}

// stackNameRE is what CloudFormation accepts as a stack name.
var stackNameRE = regexp.MustCompile(`^[A-Za-z][-A-Za-z0-9]*$`)

// bucketRE is a valid S3 bucket name (no dots: virtual-hosted HTTPS needs none).
var bucketRE = regexp.MustCompile(`^[a-z0-9][-a-z0-9]{1,61}[a-z0-9]$`)

// withDefaults checks o and fills its defaults. Errors name the
// spec.provider.aws field a user sets.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	if o.ClusterName == "" {
		errs = append(errs, errors.New("the cluster name is empty"))
	}
	if o.StackPrefix == "" {
		o.StackPrefix = "kubeplug-" + o.ClusterName
	}
	if !stackNameRE.MatchString(o.StackPrefix) || len(o.StackPrefix) > 100 {
		errs = append(errs, fmt.Errorf("spec.provider.aws.stackPrefix: expected a letter then letters, digits and '-', at most 100 characters, found %q", o.StackPrefix))
	}
	switch {
	case o.Bucket == "":
		errs = append(errs, errors.New("spec.provider.aws.bucket: expected the S3 bucket for the cluster's files, found none"))
	case !bucketRE.MatchString(o.Bucket):
		errs = append(errs, fmt.Errorf("spec.provider.aws.bucket: expected 3 to 63 lower-case letters, digits and '-', found %q", o.Bucket))
	}
	if o.StateFile == "" {
		errs = append(errs, errors.New("the state file is empty"))
	}
	for k := range o.Tags {
		if k == "" || len(k) > 128 || hasAWSPrefix(k) {
			errs = append(errs, fmt.Errorf("spec.provider.aws.tags: expected keys of 1 to 128 characters not starting with aws:, found %q", k))
		}
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.StackTimeout <= 0 {
		o.StackTimeout = DefaultStackTimeout
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, errors.Join(errs...)
}

func hasAWSPrefix(k string) bool { return len(k) >= 4 && (k[:4] == "aws:" || k[:4] == "AWS:") }
