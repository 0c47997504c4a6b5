package nodeagent_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kubeplug/kubeplug/pkg/hookspec"
	"github.com/kubeplug/kubeplug/pkg/nodeagent"
	_ "github.com/kubeplug/kubeplug/pkg/nodeagent/s3fetch" // s3:// hooks
	"github.com/kubeplug/kubeplug/test/harness/testaws"
)

// TestURLHookS3Emulator runs kops-style s3:// hooks against the AWS emulator the
// aws provider's tests use (moto's S3 on loopback), with the SDK's default
// configuration as on a machine: a script fetched and run, one whose digest
// does not match refused, a missing key reported.
func TestURLHookS3Emulator(t *testing.T) {
	srv := testaws.Start(t)
	testaws.Env(t)
	const script = "echo p/$KUBEPLUG_HOOK >> ran\n"
	cfg, err := config.LoadDefaultConfig(t.Context(), config.WithBaseEndpoint(srv.Endpoint))
	if err != nil {
		t.Fatal(err)
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("hooks")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("hooks"), Key: aws.String("node/prep.sh"), Body: strings.NewReader(script)}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	manifest(t, root,
		hookspec.Hook{Name: "prep", Behavior: hookspec.BehaviorSyncBypass, URL: "s3://hooks/node/prep.sh", SHA256: sum(script)},
		hookspec.Hook{Name: "tampered", Behavior: hookspec.BehaviorSyncBypass, URL: "s3://hooks/node/prep.sh", SHA256: sum("other")},
		hookspec.Hook{Name: "missing", Behavior: hookspec.BehaviorSyncBypass, URL: "s3://hooks/node/none.sh", SHA256: sum("never served")},
	)
	rep, err := newAgent(t, nodeagent.Options{Root: root, S3Endpoint: srv.Endpoint}).Run(t.Context(), hookspec.PhaseBeforeNodeup)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := statuses(rep), "prep=succeeded tampered=failed missing=failed"; got != want {
		t.Errorf("statuses %s, expected %s", got, want)
	}
	if r := rep.Hooks[1].Reason; !strings.Contains(r, "digest") {
		t.Errorf("tampered: %q", r)
	}
	if r := rep.Hooks[2].Reason; !strings.Contains(r, "download s3://hooks/node/none.sh: get the s3 object") || !strings.Contains(r, "NoSuchKey") {
		t.Errorf("missing: %q", r)
	}
	if got := ran(t, root); got != "p/prep" {
		t.Errorf("ran %q", got)
	}
}
