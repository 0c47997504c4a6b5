package aws_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kubeplug/kubeplug/pkg/provider/aws"
	"github.com/kubeplug/kubeplug/test/harness/testaws"
)

// coreTemplate is a small stand-in for cloud/template.json: a VPC and a queue,
// with outputs another stack takes.
const coreTemplate = `{
  "AWSTemplateFormatVersion": "2010-09-09",
  "Parameters": {"VpcCidr": {"Type": "String", "Default": "10.0.0.0/16"}},
  "Resources": {
    "VPC": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": {"Ref": "VpcCidr"}}},
    "Events": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "kubeplug-test-events"}}
  },
  "Outputs": {
    "VpcId": {"Value": {"Ref": "VPC"}},
    "EventsArn": {"Value": {"Fn::GetAtt": ["Events", "Arn"]}}
  }
}`

// pluginTemplate is a plugin's extra stack: a subnet in the core's VPC, and a
// queue whose visibility timeout is the plugin's value, rendered into the
// template (TIMEOUT).
const pluginTemplate = `{
  "Parameters": {
    "VpcId": {"Type": "String"},
    "Suffix": {"Type": "String", "Default": "work"}
  },
  "Resources": {
    "Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": {"Ref": "VpcId"}, "CidrBlock": "10.0.1.0/24"}},
    "Work": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Fn::Sub": "kubeplug-test-${Suffix}"}, "VisibilityTimeout": TIMEOUT}}
  },
  "Outputs": {"SubnetId": {"Value": {"Ref": "Subnet"}}}
}`

type recorder struct {
	mu sync.Mutex
	ev []aws.Event
}

func (r *recorder) add(e aws.Event) { r.mu.Lock(); r.ev = append(r.ev, e); r.mu.Unlock() }

// messages returns "kind stack: message" of every event so far, and forgets them.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.ev {
		out = append(out, e.Kind+" "+e.Stack+": "+e.Message)
	}
	r.ev = nil
	return out
}

func options(t *testing.T, srv *testaws.Server, rec *recorder) aws.Options {
	return aws.Options{
		ClusterName: "test", Endpoint: srv.Endpoint, Bucket: "kubeplug-test-assets",
		StateFile: filepath.Join(t.TempDir(), "aws.json"), Tags: map[string]string{"team": "platform"},
		Events: rec.add, PollInterval: 50 * time.Millisecond, CallTimeout: 20 * time.Second,
	}
}

func bundle(timeout string) aws.Bundle {
	return aws.Bundle{
		Assets: []aws.Asset{
			{Path: "nodes/workers/cloud-init.yaml", Content: []byte("#cloud-config\n")},
			{Path: "nodes/control-plane/cloud-init.yaml", Content: []byte("#cloud-config\nhostname: cp\n")},
		},
		Stacks: []aws.Stack{
			// Listed first, deployed second: it takes the core's output.
			{Name: "queue-work", Template: []byte(strings.Replace(pluginTemplate, "TIMEOUT", timeout, 1)), Parameters: map[string]string{"Suffix": "work"},
				Inputs: map[string]aws.OutputRef{"VpcId": {Stack: "core", Output: "VpcId"}}},
			{Name: "core", Template: []byte(coreTemplate)},
		},
	}
}

// sdk returns clients of the emulator, to look at what the Deployer did.
func sdk(t *testing.T, srv *testaws.Server) (*cloudformation.Client, *s3.Client) {
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithBaseEndpoint(srv.Endpoint))
	if err != nil {
		t.Fatal(err)
	}
	return cloudformation.NewFromConfig(cfg), s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
}

func has(lines []string, sub string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, sub) })
}

func TestDeployLifecycle(t *testing.T) {
	srv := testaws.Start(t)
	testaws.Env(t)
	ctx := t.Context()
	cfn, s3c := sdk(t, srv)
	// A bucket someone else owns, with an object kubeplug must leave alone.
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: sdkaws.String("shared-assets")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: sdkaws.String("shared-assets"), Key: sdkaws.String("other/file"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, bucket  string
		bucketRemains bool
	}{
		{name: "own bucket", bucket: "kubeplug-test-assets"},
		{name: "existing bucket", bucket: "shared-assets", bucketRemains: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			o := options(t, srv, rec)
			o.Bucket = tc.bucket
			d, err := aws.New(ctx, o)
			if err != nil {
				t.Fatal(err)
			}

			start := time.Now()
			res, err := d.Deploy(ctx, bundle("30"))
			if err != nil {
				t.Fatalf("deploy: %v\n%s", err, strings.Join(rec.take(), "\n"))
			}
			t.Logf("first deploy: %s", time.Since(start))
			ev := rec.take()
			if res.Uploaded != 2 || res.Existing != 0 || len(res.Stacks) != 2 {
				t.Fatalf("first deploy: uploaded %d, existing %d, stacks %d; want 2, 0, 2", res.Uploaded, res.Existing, len(res.Stacks))
			}
			if res.Stacks[0].Name != "core" || res.Stacks[1].Name != "queue-work" {
				t.Fatalf("deploy order %s, %s; want core first", res.Stacks[0].Name, res.Stacks[1].Name)
			}
			for _, want := range []string{
				"change kubeplug-test-core: + Add AWS::EC2::VPC VPC",
				"change kubeplug-test-queue-work: + Add AWS::EC2::Subnet Subnet",
				"output kubeplug-test-core: VpcId = vpc-",
			} {
				if !has(ev, want) {
					t.Errorf("events lack %q:\n%s", want, strings.Join(ev, "\n"))
				}
			}
			// The objects are in the bucket under their digest.
			for path, uri := range res.Assets {
				key := strings.TrimPrefix(uri, "s3://"+tc.bucket+"/")
				if !strings.HasPrefix(key, "kubeplug-test/sha256/") {
					t.Errorf("%s at %s, want a key under kubeplug-test/sha256/", path, uri)
				}
				if _, err := s3c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: sdkaws.String(tc.bucket), Key: sdkaws.String(key)}); err != nil {
					t.Errorf("%s: %v", uri, err)
				}
			}
			// The plugin's stack got the core's VPC, and the outputs are recorded.
			st, err := d.State()
			if err != nil {
				t.Fatal(err)
			}
			vpc := st.Outputs()["core"]["VpcId"]
			if !strings.HasPrefix(vpc, "vpc-") || st.Outputs()["queue-work"]["SubnetId"] == "" {
				t.Fatalf("recorded outputs %v", st.Outputs())
			}
			out, err := cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: sdkaws.String("kubeplug-test-queue-work")})
			if err != nil {
				t.Fatal(err)
			}
			params := map[string]string{}
			for _, p := range out.Stacks[0].Parameters {
				params[sdkaws.ToString(p.ParameterKey)] = sdkaws.ToString(p.ParameterValue)
			}
			if params["VpcId"] != vpc {
				t.Errorf("plugin stack's VpcId parameter %q, want the core's output %q", params["VpcId"], vpc)
			}
			tags := map[string]string{}
			for _, tg := range out.Stacks[0].Tags {
				tags[sdkaws.ToString(tg.Key)] = sdkaws.ToString(tg.Value)
			}
			if tags["kubeplug.dev/cluster"] != "test" || tags["team"] != "platform" {
				t.Errorf("stack tags %v", tags)
			}

			// Unchanged: nothing uploaded, no change set with changes.
			res, err = d.Deploy(ctx, bundle("30"))
			if err != nil {
				t.Fatalf("second deploy: %v", err)
			}
			ev = rec.take()
			if res.Uploaded != 0 || res.Existing != 2 {
				t.Errorf("second deploy uploaded %d, found %d; want 0, 2", res.Uploaded, res.Existing)
			}
			for _, s := range res.Stacks {
				if s.ChangeSet != "" || len(s.Changes) > 0 {
					t.Errorf("second deploy changed stack %s: %v", s.Name, s.Changes)
				}
			}
			if !has(ev, "change-set kubeplug-test-core: no changes") || !has(ev, "change-set kubeplug-test-queue-work: no changes") {
				t.Errorf("second deploy's events do not say no changes:\n%s", strings.Join(ev, "\n"))
			}
			assertNoChangeSets(ctx, t, cfn, "kubeplug-test-core", "kubeplug-test-queue-work")

			// A changed plugin value changes only the plugin's queue.
			res, err = d.Deploy(ctx, bundle("60"))
			if err != nil {
				t.Fatalf("third deploy: %v", err)
			}
			if c := res.Stacks[0].Changes; len(c) != 0 {
				t.Errorf("core changed: %v", c)
			}
			if c := res.Stacks[1].Changes; len(c) != 1 || c[0].LogicalID != "Work" || c[0].Action != "Modify" {
				t.Errorf("plugin stack's changes %v, want one: Modify Work", c)
			}
			rec.take()

			// Without the plugin's stack in the bundle, it is deleted; the core stays.
			coreOnly := bundle("60")
			coreOnly.Stacks = coreOnly.Stacks[1:]
			if _, err := d.Deploy(ctx, coreOnly); err != nil {
				t.Fatalf("deploy without the plugin's stack: %v", err)
			}
			if ev := rec.take(); !has(ev, "stack kubeplug-test-queue-work: deleted") {
				t.Errorf("the plugin's stack was not deleted:\n%s", strings.Join(ev, "\n"))
			}
			if _, err := cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: sdkaws.String("kubeplug-test-queue-work")}); err == nil {
				t.Errorf("stack kubeplug-test-queue-work still exists")
			}
			if st, _ := d.State(); len(st.Stacks) != 1 {
				t.Errorf("recorded stacks %+v, want the core only", st.Stacks)
			}

			if err := d.Destroy(ctx); err != nil {
				t.Fatalf("destroy: %v", err)
			}
			for _, name := range []string{"kubeplug-test-core", "kubeplug-test-queue-work"} {
				if _, err := cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: sdkaws.String(name)}); err == nil {
					t.Errorf("stack %s still exists after destroy", name)
				}
			}
			list, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: sdkaws.String(tc.bucket)})
			switch {
			case tc.bucketRemains && err != nil:
				t.Errorf("bucket %s was deleted: %v", tc.bucket, err)
			case tc.bucketRemains:
				var keys []string
				for _, o := range list.Contents {
					keys = append(keys, sdkaws.ToString(o.Key))
				}
				if !slices.Equal(keys, []string{"other/file"}) {
					t.Errorf("bucket %s holds %v after destroy, want only other/file", tc.bucket, keys)
				}
			case err == nil:
				t.Errorf("bucket %s created by the deploy still exists", tc.bucket)
			}
			if _, err := os.Stat(o.StateFile); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state file left after destroy: %v", err)
			}
		})
	}
}

func assertNoChangeSets(ctx context.Context, t *testing.T, cfn *cloudformation.Client, stacks ...string) {
	t.Helper()
	for _, s := range stacks {
		out, err := cfn.ListChangeSets(ctx, &cloudformation.ListChangeSetsInput{StackName: sdkaws.String(s)})
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range out.Summaries {
			if cs.ExecutionStatus != "EXECUTE_COMPLETE" {
				t.Errorf("stack %s keeps change set %s (%s, %s)", s, sdkaws.ToString(cs.ChangeSetName), cs.Status, cs.ExecutionStatus)
			}
		}
	}
}

func TestDeployRejects(t *testing.T) {
	srv := testaws.Start(t)
	testaws.Env(t)
	stack := func(name, tmpl string) aws.Stack { return aws.Stack{Name: name, Template: []byte(tmpl)} }
	for _, tc := range []struct {
		name   string
		stacks []aws.Stack
		want   []string
		is     error
	}{{
		name:   "ref to a missing resource",
		stacks: []aws.Stack{stack("core", `{"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Ref": "Missing"}}}}}`)},
		want:   []string{"stack core", "Resources.Q.Properties.QueueName", "Ref to Missing"},
		is:     aws.ErrTemplate,
	}, {
		name:   "getatt of a missing resource",
		stacks: []aws.Stack{stack("core", `{"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}, "Outputs": {"A": {"Value": {"Fn::GetAtt": "Nope.Arn"}}}}`)},
		want:   []string{"Outputs.A.Value", "Fn::GetAtt of Nope.Arn"},
		is:     aws.ErrTemplate,
	}, {
		name:   "bad type",
		stacks: []aws.Stack{stack("core", `{"Resources": {"Q": {"Type": "Queue"}}}`)},
		want:   []string{"Resources.Q.Type", "found Queue"},
		is:     aws.ErrTemplate,
	}, {
		name:   "unknown parameter",
		stacks: []aws.Stack{{Name: "core", Template: []byte(coreTemplate), Parameters: map[string]string{"VpcCIDR": "x"}}},
		want:   []string{"parameter VpcCIDR", "declares no such parameter (it declares VpcCidr)"},
		is:     aws.ErrTemplate,
	}, {
		name: "cycle",
		stacks: []aws.Stack{
			{Name: "a", Template: []byte(coreTemplate), DependsOn: []string{"b"}},
			{Name: "b", Template: []byte(coreTemplate), DependsOn: []string{"a"}},
		},
		want: []string{"a -> b -> a"},
	}, {
		name:   "unknown stack",
		stacks: []aws.Stack{{Name: "a", Template: []byte(coreTemplate), Inputs: map[string]aws.OutputRef{"VpcCidr": {Stack: "core", Output: "X"}}}},
		want:   []string{"stack a depends on stack core, which no plugin defines"},
	}, {
		name: "missing output",
		stacks: []aws.Stack{
			stack("core", coreTemplate),
			{Name: "p", Template: []byte(strings.Replace(pluginTemplate, "TIMEOUT", "30", 1)), Inputs: map[string]aws.OutputRef{"VpcId": {Stack: "core", Output: "Vpc"}}},
		},
		want: []string{"stack p: parameter VpcId takes output Vpc of stack core, which has no such output (it has EventsArn, VpcId)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			o := options(t, srv, rec)
			d, err := aws.New(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Deploy(t.Context(), aws.Bundle{Stacks: tc.stacks})
			if err == nil {
				t.Fatal("deploy succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if err := d.Destroy(t.Context()); err != nil {
				t.Errorf("destroy: %v", err)
			}
		})
	}
}

func TestBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts aws.Options
		want string
	}{
		{"no bucket", aws.Options{ClusterName: "c", StateFile: "s"}, "spec.provider.aws.bucket: expected the S3 bucket"},
		{"bad bucket", aws.Options{ClusterName: "c", StateFile: "s", Bucket: "Has_Upper"}, `spec.provider.aws.bucket: expected 3 to 63 lower-case letters, digits and '-', found "Has_Upper"`},
		{"bad prefix", aws.Options{ClusterName: "c", StateFile: "s", Bucket: "b-1", StackPrefix: "1x"}, `spec.provider.aws.stackPrefix: expected a letter`},
		{"aws tag", aws.Options{ClusterName: "c", StateFile: "s", Bucket: "b-1", Tags: map[string]string{"aws:x": "y"}}, `spec.provider.aws.tags`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := aws.New(t.Context(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestMissingCredentials(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_REGION": "eu-west-1", "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	_, err := aws.New(t.Context(), aws.Options{ClusterName: "c", Bucket: "bucket-1", StateFile: filepath.Join(dir, "s.json")})
	if !errors.Is(err, aws.ErrNoCredentials) {
		t.Fatalf("error %v, want ErrNoCredentials", err)
	}
	for _, w := range []string{"AWS_ACCESS_KEY_ID", filepath.Join(dir, "credentials"), `profile "default"`, "AWS_EC2_METADATA_DISABLED=true"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
	t.Setenv("AWS_REGION", "")
	_, err = aws.New(t.Context(), aws.Options{ClusterName: "c", Bucket: "bucket-1", StateFile: filepath.Join(dir, "s.json")})
	if !errors.Is(err, aws.ErrNoRegion) || !strings.Contains(err.Error(), "spec.provider.aws.region") {
		t.Fatalf("error %v, want ErrNoRegion naming spec.provider.aws.region", err)
	}
}

// TestUnreachableEndpoint: an endpoint that refuses connections, and one that
// accepts them and never answers, fail within the call timeout, naming it.
func TestUnreachableEndpoint(t *testing.T) {
	testaws.Env(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = silent.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	_ = closed.Close()
	for _, tc := range []struct {
		name, endpoint, want string
		timeout              time.Duration
	}{
		{"slow", "http://" + silent.Addr().String(), "no answer from http://" + silent.Addr().String() + " within", time.Second},
		// The SDK retries a refused connection twice, with backoff.
		{"down", "http://" + closedAddr, "connection refused", 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, &testaws.Server{Endpoint: tc.endpoint}, &recorder{})
			o.CallTimeout = tc.timeout
			d, err := aws.New(t.Context(), o)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = d.Deploy(t.Context(), bundle("30"))
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "bucket kubeplug-test-assets") {
				t.Fatalf("error %v, want one about the bucket containing %q", err, tc.want)
			}
			if took > 10*time.Second {
				t.Errorf("took %s to fail", took)
			}
		})
	}
}

// helperEnv makes the test binary a deploy that kills itself with SIGKILL once
// it printed its first change: the change set exists, not yet executed.
const helperEnv = "KUBEPLUG_AWS_KILL_HELPER"

type helperOptions struct {
	ClusterName, Endpoint, Bucket, StateFile string
	Tags                                     map[string]string
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		var h helperOptions
		if err := json.Unmarshal([]byte(spec), &h); err != nil {
			panic(err)
		}
		o := aws.Options{ClusterName: h.ClusterName, Endpoint: h.Endpoint, Bucket: h.Bucket, StateFile: h.StateFile, Tags: h.Tags, PollInterval: 50 * time.Millisecond}
		o.Events = func(e aws.Event) {
			if e.Kind == "change" {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Minute)
			}
		}
		d, err := aws.New(context.Background(), o)
		if err != nil {
			panic(err)
		}
		_, err = d.Deploy(context.Background(), bundle("30"))
		fmt.Fprintln(os.Stderr, "helper: deploy returned", err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// TestResumeAfterKill: a deploy killed between creating a change set and
// executing it leaves the change set; the next deploy finds and executes it.
func TestResumeAfterKill(t *testing.T) {
	srv := testaws.Start(t)
	testaws.Env(t)
	rec := &recorder{}
	o := options(t, srv, rec)
	spec, err := json.Marshal(helperOptions{ClusterName: o.ClusterName, Endpoint: o.Endpoint, Bucket: o.Bucket, StateFile: o.StateFile, Tags: o.Tags})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$") //nolint:gosec // this test binary
	cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper: %v, want killed by SIGKILL\n%s", err, out)
	}
	st, err := aws.ReadState(o.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Stacks) != 1 || st.Stacks[0].ChangeSet == "" || len(st.Objects) != 2 {
		t.Fatalf("state after the kill: %+v; want the core stack with its change set and 2 objects", st)
	}
	d, err := aws.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Deploy(t.Context(), bundle("30"))
	ev := rec.take()
	if err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(ev, "\n"))
	}
	if !has(ev, "change-set kubeplug-test-core: found change set "+st.Stacks[0].ChangeSet) {
		t.Errorf("the re-run did not find the change set %s:\n%s", st.Stacks[0].ChangeSet, strings.Join(ev, "\n"))
	}
	if res.Existing != 2 || res.Uploaded != 0 || res.Stacks[0].Status != "CREATE_COMPLETE" || res.Stacks[1].Status != "CREATE_COMPLETE" {
		t.Errorf("re-run: existing %d, uploaded %d, stacks %+v", res.Existing, res.Uploaded, res.Stacks)
	}
	if err := d.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestPreview: before the first deploy every resource is an Add and nothing is
// created; on deployed stacks a changed value shows the one change, and the
// preview's change sets are gone afterwards.
func TestPreview(t *testing.T) {
	srv := testaws.Start(t)
	testaws.Env(t)
	ctx := t.Context()
	cfn, _ := sdk(t, srv)
	d, err := aws.New(ctx, options(t, srv, &recorder{}))
	if err != nil {
		t.Fatal(err)
	}
	pv, err := d.Preview(ctx, bundle("30"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pv) != 2 || pv[0].Exists || pv[1].Exists || len(pv[0].Changes) != 2 || pv[0].Changes[0].String() != "+ Add AWS::SQS::Queue Events" {
		t.Fatalf("preview before deploy: %+v", pv)
	}
	if out, err := cfn.ListStacks(ctx, &cloudformation.ListStacksInput{}); err != nil || len(out.StackSummaries) != 0 {
		t.Fatalf("the preview created stacks: %v %v", out, err)
	}
	if _, err := d.Deploy(ctx, bundle("30")); err != nil {
		t.Fatal(err)
	}
	pv, err = d.Preview(ctx, bundle("60"))
	if err != nil {
		t.Fatal(err)
	}
	if !pv[0].Exists || len(pv[0].Changes) != 0 {
		t.Errorf("core preview %+v, want no changes", pv[0])
	}
	if len(pv[1].Changes) != 1 || pv[1].Changes[0].String() != "~ Modify AWS::SQS::Queue Work" {
		t.Errorf("queue preview %+v, want one Modify of Work", pv[1])
	}
	assertNoChangeSets(ctx, t, cfn, "kubeplug-test-core", "kubeplug-test-queue-work")
	// The preview changed nothing: deploying the old bundle again is a no-op.
	res, err := d.Deploy(ctx, bundle("30"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Stacks {
		if s.ChangeSet != "" {
			t.Errorf("stack %s changed after a preview: %v", s.Name, s.Changes)
		}
	}
	if err := d.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDriftUnsupported: moto does not detect drift; Drift says so plainly.
func TestDriftUnsupported(t *testing.T) {
	srv := testaws.Start(t)
	testaws.Env(t)
	d, err := aws.New(t.Context(), options(t, srv, &recorder{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Deploy(t.Context(), aws.Bundle{Stacks: []aws.Stack{{Name: "core", Template: []byte(coreTemplate)}}}); err != nil {
		t.Fatal(err)
	}
	_, err = d.Drift(t.Context())
	if !errors.Is(err, aws.ErrDriftUnsupported) || !strings.Contains(err.Error(), srv.Endpoint) {
		t.Errorf("error %v, want ErrDriftUnsupported naming %s", err, srv.Endpoint)
	}
	if err := d.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
}
