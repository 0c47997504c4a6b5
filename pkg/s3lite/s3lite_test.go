package s3lite

import (
	"context"
	"crypto/md5" //nolint:gosec // checks the Content-MD5 S3 requires
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"
)

func testConfig(region string) aws.Config {
	return aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
}

// TestRequestsArePathStyleSignedAndEscaped: on an endpoint override every call
// goes path-style, signed for s3 in the region, with the payload's sha256, and
// a key's special characters escaped once in the path that was signed.
func TestRequestsArePathStyleSignedAndEscaped(t *testing.T) {
	var got []*http.Request
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got, bodies = append(got, r), append(bodies, string(b))
		if r.URL.Query().Has("list-type") {
			_, _ = io.WriteString(w, `<ListBucketResult><KeyCount>1</KeyCount><Contents><Key>a/b</Key></Contents></ListBucketResult>`)
		}
	}))
	defer srv.Close()
	c, err := New(context.Background(), testConfig("eu-west-1"), srv.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.PutObject(ctx, PutInput{Bucket: "bkt", Key: "p/a b+c.sh", Body: []byte("hi"), ContentType: "text/x-sh",
		Metadata: map[string]string{"kubeplug-cluster": "demo"}, KMSKeyID: "arn:key"}); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	keys, err := c.ListKeys(ctx, "bkt", 1)
	if err != nil || len(keys) != 1 || keys[0] != "a/b" {
		t.Fatalf("ListKeys = %v, %v; want [a/b]", keys, err)
	}
	put := got[0]
	if put.Method != http.MethodPut || put.URL.EscapedPath() != "/bkt/p/a%20b%2Bc.sh" || bodies[0] != "hi" {
		t.Errorf("put: %s %s %q; want PUT /bkt/p/a%%20b%%2Bc.sh \"hi\"", put.Method, put.URL.EscapedPath(), bodies[0])
	}
	for h, want := range map[string]string{
		"Content-Type": "text/x-sh", "X-Amz-Meta-Kubeplug-Cluster": "demo",
		"X-Amz-Server-Side-Encryption": "aws:kms", "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id": "arn:key",
		"X-Amz-Content-Sha256": "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4", // sha256("hi")
	} {
		if v := put.Header.Get(h); v != want {
			t.Errorf("put header %s = %q, want %q", h, v, want)
		}
	}
	if a := put.Header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKID/") || !strings.Contains(a, "/eu-west-1/s3/aws4_request") {
		t.Errorf("put Authorization = %q, want SigV4 for s3 in eu-west-1", a)
	}
	if !strings.Contains(bodies[1], "<LocationConstraint>eu-west-1</LocationConstraint>") || got[1].URL.Path != "/bkt/" {
		t.Errorf("create bucket: %s %q, want /bkt/ with the region's LocationConstraint", got[1].URL.Path, bodies[1])
	}
	if q := got[2].URL.RawQuery; q != "list-type=2&max-keys=1" {
		t.Errorf("list query %q", q)
	}
}

// TestAWSAddressing: without an override a bucket is addressed virtual-hosted
// on the region's endpoint, path-style when its name has a dot.
func TestAWSAddressing(t *testing.T) {
	c, err := New(context.Background(), testConfig("eu-west-1"), "")
	if err != nil {
		t.Fatal(err)
	}
	for bucket, want := range map[string]string{
		"bkt":     "https://bkt.s3.eu-west-1.amazonaws.com/k%20y",
		"a.b.com": "https://s3.eu-west-1.amazonaws.com/a.b.com/k%20y",
	} {
		r, err := c.request(context.Background(), http.MethodGet, bucket, "k y", "", nil, nil)
		if err != nil || r.URL.String() != want {
			t.Errorf("bucket %s: %v %v, want %s", bucket, r.URL, err, want)
		}
	}
}

// TestAWSHostHonoursFIPSAndDualStack: the SDK chain's FIPS and dual-stack
// settings pick S3's FIPS and dual-stack hosts, China's regions their own
// domain, and a region of a partition this package does not know is refused
// by name, never sent to a guessed host.
func TestAWSHostHonoursFIPSAndDualStack(t *testing.T) {
	for _, tc := range []struct {
		region     string
		fips, dual bool
		want       string
	}{
		{"eu-west-1", false, false, "s3.eu-west-1.amazonaws.com"},
		{"eu-west-1", true, false, "s3-fips.eu-west-1.amazonaws.com"},
		{"eu-west-1", false, true, "s3.dualstack.eu-west-1.amazonaws.com"},
		{"us-gov-west-1", true, true, "s3-fips.dualstack.us-gov-west-1.amazonaws.com"},
		{"cn-north-1", false, false, "s3.cn-north-1.amazonaws.com.cn"},
	} {
		cfg := testConfig(tc.region)
		var opts config.LoadOptions
		if tc.fips {
			opts.UseFIPSEndpoint = aws.FIPSEndpointStateEnabled
		}
		if tc.dual {
			opts.UseDualStackEndpoint = aws.DualStackEndpointStateEnabled
		}
		cfg.ConfigSources = []any{opts}
		c, err := New(context.Background(), cfg, "")
		if err != nil {
			t.Errorf("%s: %v", tc.region, err)
			continue
		}
		if c.host != tc.want {
			t.Errorf("%s fips=%v dual=%v: %q, want %s", tc.region, tc.fips, tc.dual, c.host, tc.want)
		}
	}
	if _, err := New(context.Background(), testConfig("us-iso-east-1"), ""); err == nil || !strings.Contains(err.Error(), "us-iso-east-1") || !strings.Contains(err.Error(), "AWS_ENDPOINT_URL_S3") {
		t.Errorf("an ISO region: %v, want a refusal naming it and AWS_ENDPOINT_URL_S3", err)
	}
}

// TestErrorsAndRetries: S3's error document becomes an Error (a
// smithy.APIError) IsNotFound understands, a HEAD's bare 404 is NotFound,
// and a 503 is tried again while a 403 is not.
func TestErrorsAndRetries(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case r.URL.Path == "/b/slow" && n == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `<Error><Code>SlowDown</Code></Error>`)
		case r.URL.Path == "/b/slow":
			_, _ = io.WriteString(w, "content")
		case r.Method == http.MethodHead:
			w.WriteHeader(http.StatusNotFound)
		case r.URL.Path == "/b/denied":
			w.Header().Set("X-Amz-Request-Id", "R1")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>`)
		}
	}))
	defer srv.Close()
	c, err := New(context.Background(), testConfig(""), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body, err := c.GetObject(ctx, "b", "slow")
	if err != nil {
		t.Fatalf("GetObject after one 503: %v", err)
	}
	if b, _ := io.ReadAll(body); string(b) != "content" {
		t.Errorf("body %q", b)
	}
	_ = body.Close()
	if err := c.HeadObject(ctx, "b", "none"); !IsNotFound(err) {
		t.Errorf("HeadObject of a missing key: %v, want NotFound", err)
	}
	if _, err := c.GetObject(ctx, "b", "none"); !IsNotFound(err) || !strings.Contains(err.Error(), "NoSuchKey: The specified key does not exist.") {
		t.Errorf("GetObject of a missing key: %v", err)
	}
	calls.Store(0)
	_, err = c.GetObject(ctx, "b", "denied")
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "AccessDenied" || IsNotFound(err) || calls.Load() != 1 ||
		err.Error() != "s3 GetObject: 403 AccessDenied: Access Denied (request R1)" {
		t.Errorf("GetObject denied: %v after %d calls; want one AccessDenied", err, calls.Load())
	}
}

// TestDeleteObjects sends the quiet Delete document with its Content-MD5 and
// returns the keys S3 could not delete.
func TestDeleteObjects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sum := md5.Sum(b) //nolint:gosec // see the import
		if r.Method != http.MethodPost || !r.URL.Query().Has("delete") || r.Header.Get("Content-Md5") != base64.StdEncoding.EncodeToString(sum[:]) ||
			!strings.Contains(string(b), "<Object><Key>x&amp;y</Key></Object><Object><Key>z</Key></Object><Quiet>true</Quiet>") {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, `<DeleteResult><Error><Key>z</Key><Code>AccessDenied</Code><Message>no</Message></Error></DeleteResult>`)
	}))
	defer srv.Close()
	c, err := New(context.Background(), testConfig("us-east-1"), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	failed, err := c.DeleteObjects(context.Background(), "b", []string{"x&y", "z"})
	if err != nil || len(failed) != 1 || failed[0] != (DeleteError{Key: "z", Code: "AccessDenied", Message: "no"}) {
		t.Fatalf("DeleteObjects = %+v, %v", failed, err)
	}
}

func TestBadEndpoint(t *testing.T) {
	if _, err := New(context.Background(), testConfig(""), "s3.example.com"); err == nil || !strings.Contains(err.Error(), `"s3.example.com": not an http(s) URL`) {
		t.Errorf("New with a bare host: %v", err)
	}
}
