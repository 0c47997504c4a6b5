package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/kubeplug/kubeplug/pkg/cmd"
	"github.com/kubeplug/kubeplug/test/harness/testaws"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"kubeplug": func() {
			os.Exit(cmd.Main(context.Background(), os.Args[1:], cmd.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
		},
	})
}

// TestAWS runs the scripts in testdata, each against an emulator of its own,
// with the standard AWS chain's environment pointing at it and nothing of the
// machine's own AWS configuration.
func TestAWS(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata",
		Setup: func(env *testscript.Env) error {
			srv := testaws.Start(env.T().(testing.TB))
			for k, v := range map[string]string{
				"AWS_ENDPOINT_URL": srv.Endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
				"AWS_REGION": testaws.Region, "AWS_EC2_METADATA_DISABLED": "true",
				"AWS_CONFIG_FILE": filepath.Join(env.WorkDir, "aws-config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(env.WorkDir, "aws-credentials"),
				"HOME": filepath.Join(env.WorkDir, "home"), "XDG_STATE_HOME": filepath.Join(env.WorkDir, "state"),
			} {
				env.Setenv(k, v)
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"awsnet":  awsnet,
			"subst":   subst,
			"awsshow": awsshow,
			"awsboot": awsboot,
			"tokenof": tokenof,
			"mode":    mode,
		},
	})
}

func sdkConfig(ts *testscript.TestScript) sdkaws.Config {
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion(ts.Getenv("AWS_REGION")), config.WithBaseEndpoint(ts.Getenv("AWS_ENDPOINT_URL")),
		config.WithCredentialsProvider(sdkaws.CredentialsProviderFunc(func(context.Context) (sdkaws.Credentials, error) {
			return sdkaws.Credentials{AccessKeyID: "testing", SecretAccessKey: "testing"}, nil
		})))
	ts.Check(err)
	return cfg
}

// networkTemplate is an existing network for a cluster file to name: a VPC with
// two subnets, made by the test (not by kubeplug) in a stack of its own.
const networkTemplate = `{"Resources": {
  "VPC": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
  "A": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "VPC"}, "CidrBlock": "10.0.0.0/24", "AvailabilityZone": "us-east-1a"}},
  "B": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "VPC"}, "CidrBlock": "10.0.1.0/24", "AvailabilityZone": "us-east-1b"}}},
 "Outputs": {"VPC": {"Value": {"Ref": "VPC"}}, "A": {"Value": {"Ref": "A"}}, "B": {"Value": {"Ref": "B"}}}}`

// awsnet creates the existing network (stack "network") and sets $VPC,
// $SUBNET0 and $SUBNET1.
func awsnet(ts *testscript.TestScript, neg bool, _ []string) {
	if neg {
		ts.Fatalf("unsupported: ! awsnet")
	}
	ctx := context.Background()
	cfn := cloudformation.NewFromConfig(sdkConfig(ts))
	_, err := cfn.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: sdkaws.String("network"), TemplateBody: sdkaws.String(networkTemplate)})
	ts.Check(err)
	w := cloudformation.NewStackCreateCompleteWaiter(cfn, func(o *cloudformation.StackCreateCompleteWaiterOptions) { o.MinDelay = 100 * time.Millisecond })
	out, err := w.WaitForOutput(ctx, &cloudformation.DescribeStacksInput{StackName: sdkaws.String("network")}, time.Minute)
	ts.Check(err)
	env := map[string]string{"VPC": "VPC", "A": "SUBNET0", "B": "SUBNET1"}
	for _, o := range out.Stacks[0].Outputs {
		ts.Setenv(env[sdkaws.ToString(o.OutputKey)], sdkaws.ToString(o.OutputValue))
	}
}

// subst replaces $NAME and ${NAME} in files by the script's environment.
func subst(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: subst file...")
	}
	for _, f := range args {
		ts.Check(os.WriteFile(ts.MkAbs(f), []byte(os.Expand(ts.ReadFile(f), ts.Getenv)), 0o600))
	}
}

// awsshow prints what the emulator holds, sorted, one line each: stacks not
// deleted ("stack NAME STATUS"), buckets with their object count, Auto Scaling
// groups, launch templates, security groups (but the VPCs' defaults), IAM roles
// and SQS queues.
func awsshow(ts *testscript.TestScript, neg bool, _ []string) {
	if neg {
		ts.Fatalf("unsupported: ! awsshow")
	}
	ctx := context.Background()
	cfg := sdkConfig(ts)
	var lines []string
	stacks, err := cloudformation.NewFromConfig(cfg).ListStacks(ctx, &cloudformation.ListStacksInput{})
	ts.Check(err)
	for _, s := range stacks.StackSummaries {
		if s.StackStatus != cfntypes.StackStatusDeleteComplete {
			lines = append(lines, fmt.Sprintf("stack %s %s", sdkaws.ToString(s.StackName), s.StackStatus))
		}
	}
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	buckets, err := s3c.ListBuckets(ctx, &s3.ListBucketsInput{})
	ts.Check(err)
	for _, b := range buckets.Buckets {
		objs, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b.Name})
		ts.Check(err)
		lines = append(lines, fmt.Sprintf("bucket %s %d", sdkaws.ToString(b.Name), len(objs.Contents)))
	}
	// The other services through their query APIs, signed as the SDK signs.
	for _, q := range []struct{ service, version, action, tag, kind string }{
		{"autoscaling", "2011-01-01", "DescribeAutoScalingGroups", "AutoScalingGroupName", "autoscaling-group"},
		{"ec2", "2016-11-15", "DescribeLaunchTemplates", "launchTemplateName", "launch-template"},
		{"ec2", "2016-11-15", "DescribeSecurityGroups", "groupDescription", "security-group"},
		{"iam", "2010-05-08", "ListRoles", "RoleName", "role"},
		{"sqs", "2012-11-05", "ListQueues", "QueueUrl", "queue"},
	} {
		for _, v := range query(ts, cfg, q.service, q.version, q.action, q.tag) {
			if v != "default VPC security group" {
				lines = append(lines, q.kind+" "+v)
			}
		}
	}
	slices.Sort(lines)
	_, _ = fmt.Fprintln(ts.Stdout(), strings.Join(lines, "\n"))
}

// query calls a query-protocol action and returns the text of every element
// named tag in the answer.
func query(ts *testscript.TestScript, cfg sdkaws.Config, service, version, action, tag string) []string {
	return signedQuery(ts, cfg, service, version, action, tag, url.Values{})
}

// signedQuery calls a query-protocol action with params, signed with cfg's
// credentials, and returns the text of every element named tag in the answer.
func signedQuery(ts *testscript.TestScript, cfg sdkaws.Config, service, version, action, tag string, params url.Values) []string {
	ctx := context.Background()
	params.Set("Action", action)
	params.Set("Version", version)
	body := params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.Getenv("AWS_ENDPOINT_URL")+"/", strings.NewReader(body))
	ts.Check(err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	creds, err := cfg.Credentials.Retrieve(ctx)
	ts.Check(err)
	sum := sha256.Sum256([]byte(body))
	ts.Check(v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), service, cfg.Region, time.Now()))
	resp, err := http.DefaultClient.Do(req)
	ts.Check(err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	ts.Check(err)
	if resp.StatusCode != http.StatusOK {
		ts.Fatalf("%s %s: %s: %s", service, action, resp.Status, b)
	}
	return elements(string(b), tag)
}

// elements are the texts of every element named tag in an XML answer.
func elements(b, tag string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<`+tag+`>([^<]*)</`+tag+`>`).FindAllStringSubmatch(b, -1) {
		out = append(out, m[1])
	}
	return out
}
