package nodeagent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kubeplug/kubeplug/pkg/nodeagent"
	"github.com/kubeplug/kubeplug/test/harness/testaws"
)

// TestFetchSecretsS3Emulator is the machine's fetch step against the
// emulator's S3, with the SDK's default chain standing for the instance role:
// the files written with their modes; a missing object waited for, then
// named; an object that is not boot secrets named; an object uploaded while
// the step waits found.
func TestFetchSecretsS3Emulator(t *testing.T) {
	srv := testaws.Start(t)
	testaws.Env(t)
	cfg, err := config.LoadDefaultConfig(t.Context(), config.WithBaseEndpoint(srv.Endpoint))
	if err != nil {
		t.Fatal(err)
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("assets")}); err != nil {
		t.Fatal(err)
	}
	put := func(key string, body []byte) {
		t.Helper()
		if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("assets"), Key: aws.String(key), Body: strings.NewReader(string(body))}); err != nil {
			t.Fatal(err)
		}
	}
	bs := &nodeagent.BootSecrets{Files: []nodeagent.SecretFile{
		{Path: "/etc/kubernetes/pki/ca.crt", Mode: "0644", Content: []byte("CA\n")},
		{Path: "/etc/kubernetes/bootstrap-kubelet.conf", Mode: "0600", Content: []byte("token: abcdef.0123456789abcdef\n")},
	}, Units: []string{"kubeplug-bootstrap-token.service"}}
	body, err := nodeagent.EncodeBootSecrets(bs)
	if err != nil {
		t.Fatal(err)
	}
	put("p/boot/workers/boot-secrets.json", body)
	put("p/boot/broken/boot-secrets.json", []byte("not json"))

	root := t.TempDir()
	var started []string
	opts := nodeagent.FetchSecretsOptions{Root: root, S3Endpoint: srv.Endpoint, URL: "s3://assets/p/boot/workers/boot-secrets.json",
		StartUnits: func(_ context.Context, units []string) error { started = append(started, units...); return nil }}
	if _, err := nodeagent.FetchSecrets(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	if strings.Join(started, " ") != "kubeplug-bootstrap-token.service" {
		t.Errorf("started %q, expected the object's units once its files are written", started)
	}
	for _, f := range bs.Files {
		file := filepath.Join(root, f.Path)
		b, err := os.ReadFile(file)
		if err != nil || string(b) != string(f.Content) {
			t.Errorf("%s: %q, %v; expected %q", f.Path, b, err, f.Content)
		}
		if fi, err := os.Stat(file); err == nil && fi.Mode().Perm().String() != map[string]string{"0644": "-rw-r--r--", "0600": "-rw-------"}[f.Mode] {
			t.Errorf("%s: mode %s, expected %s", f.Path, fi.Mode().Perm(), f.Mode)
		}
	}

	missing := opts
	missing.URL, missing.Wait, missing.Interval = "s3://assets/p/boot/gone/boot-secrets.json", 300*time.Millisecond, 100*time.Millisecond
	_, err = nodeagent.FetchSecrets(t.Context(), missing)
	if !errors.Is(err, nodeagent.ErrSecretsMissing) || !strings.Contains(err.Error(), missing.URL) {
		t.Errorf("missing object: %v; expected ErrSecretsMissing naming %s", err, missing.URL)
	}

	broken := opts
	broken.URL, broken.Root = "s3://assets/p/boot/broken/boot-secrets.json", t.TempDir()
	if _, err := nodeagent.FetchSecrets(t.Context(), broken); err == nil || !strings.Contains(err.Error(), broken.URL+": decode") {
		t.Errorf("broken object: %v; expected an error naming %s", err, broken.URL)
	}
	if entries, _ := os.ReadDir(broken.Root); len(entries) > 0 {
		t.Errorf("broken object: wrote %d entries", len(entries))
	}

	late := opts
	late.URL, late.Root, late.Wait, late.Interval = "s3://assets/p/boot/late/boot-secrets.json", t.TempDir(), time.Minute, 100*time.Millisecond
	go func() {
		time.Sleep(500 * time.Millisecond)
		_, _ = c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String("assets"), Key: aws.String("p/boot/late/boot-secrets.json"), Body: strings.NewReader(string(body))})
	}()
	if _, err := nodeagent.FetchSecrets(t.Context(), late); err != nil {
		t.Fatalf("late object: %v", err)
	}
	if _, err := os.Stat(filepath.Join(late.Root, "etc/kubernetes/pki/ca.crt")); err != nil {
		t.Error(err)
	}
}
