// Package s3lite makes the eight S3 calls kubeplug needs (an object put, got,
// looked for; objects deleted; a bucket looked for, made, listed, deleted) as
// plain HTTP requests signed with SigV4 by the AWS SDK's signer, with the
// credentials, region, HTTP client and endpoint of the SDK's standard
// configuration chain (aws.Config).
//
// It replaces the SDK's S3 client, which linked about 6 MB into the CLI's
// binary for these eight calls (issue 42: the binary under 100 MB): the S3
// client carries every S3 operation's serialisers and its endpoint rules.
// The credentials chain (environment, profiles, SSO, web identity, container
// and instance roles) stays the SDK's.
//
// Requests go to the endpoint override when one is given (path-style, as
// emulators and private stores want), else to AWS S3 in the region
// (virtual-hosted, or path-style for a bucket name with a dot). Failed calls
// are tried again, up to the configuration's attempts (3 by default), on a
// network error, a 5xx answer or throttling, as the SDK's standard retryer
// does.
package s3lite

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // S3's DeleteObjects requires Content-MD5: an integrity check, not security
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go"
)

// Client makes S3 calls with one AWS configuration.
type Client struct {
	cfg      aws.Config
	endpoint *url.URL // nil: AWS S3 in cfg.Region
	signer   *v4.Signer
	attempts int
	host     string // AWS S3's host in cfg.Region: FIPS and dual-stack as configured
}

// New returns a client of cfg (ctx bounds reading cfg's FIPS and dual-stack
// settings). endpoint, when not empty, is the URL of an
// S3-compatible store, addressed path-style; else AWS_ENDPOINT_URL_S3, else
// cfg.BaseEndpoint, else AWS S3 in cfg.Region.
func New(ctx context.Context, cfg aws.Config, endpoint string) (*Client, error) {
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL_S3")
	}
	if endpoint == "" {
		endpoint = aws.ToString(cfg.BaseEndpoint)
	}
	c := &Client{cfg: cfg, attempts: cfg.RetryMaxAttempts,
		signer: v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })}
	if c.attempts <= 0 {
		c.attempts = 3
	}
	if c.cfg.Region == "" {
		// Signing needs a region; an S3-compatible store mostly ignores it.
		c.cfg.Region = "us-east-1"
	}
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("s3 endpoint %q: not an http(s) URL", endpoint)
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		c.endpoint = u
		return c, nil
	}
	host, err := awsHost(ctx, c.cfg)
	if err != nil {
		return nil, err
	}
	c.host = host
	return c, nil
}

// awsHost is AWS S3's host in cfg's region, honouring the FIPS and
// dual-stack settings of the SDK's configuration chain (AWS_USE_FIPS_ENDPOINT,
// AWS_USE_DUALSTACK_ENDPOINT, the profile's use_fips_endpoint and
// use_dualstack_endpoint) as the SDK's S3 client did. A region of a partition
// whose S3 host this package does not know (the isolated ISO partitions) is
// refused by name rather than sent to a wrong host: such sites set
// AWS_ENDPOINT_URL_S3.
func awsHost(ctx context.Context, cfg aws.Config) (string, error) {
	region := cfg.Region
	suffix := ".amazonaws.com"
	switch {
	case strings.HasPrefix(region, "cn-"):
		suffix = ".amazonaws.com.cn"
	case strings.HasPrefix(region, "us-iso"), strings.HasPrefix(region, "eu-isoe-"):
		return "", fmt.Errorf("s3 in region %s: kubeplug does not know this partition's S3 endpoint; set AWS_ENDPOINT_URL_S3 to it", region)
	}
	fips, dual := false, false
	for _, src := range cfg.ConfigSources {
		if s, ok := src.(interface {
			GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error)
		}); ok {
			if v, found, err := s.GetUseFIPSEndpoint(ctx); err == nil && found {
				fips = v == aws.FIPSEndpointStateEnabled
			}
		}
		if s, ok := src.(interface {
			GetUseDualStackEndpoint(context.Context) (aws.DualStackEndpointState, bool, error)
		}); ok {
			if v, found, err := s.GetUseDualStackEndpoint(ctx); err == nil && found {
				dual = v == aws.DualStackEndpointStateEnabled
			}
		}
	}
	host := "s3"
	if fips {
		host = "s3-fips"
	}
	if dual {
		host += ".dualstack"
	}
	return host + "." + region + suffix, nil
}

// Error is an S3 call's failure as S3 answered it. It is a smithy.APIError,
// as the SDK's errors are.
type Error struct {
	Op        string // the S3 operation, e.g. "PutObject"
	Status    int
	Code      string // S3's error code, e.g. "NoSuchKey"; "NotFound" for a 404 to HEAD
	Message   string
	RequestID string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("s3 %s: %d %s", e.Op, e.Status, e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// ErrorCode implements smithy.APIError.
func (e *Error) ErrorCode() string { return e.Code }

// ErrorMessage implements smithy.APIError.
func (e *Error) ErrorMessage() string { return e.Message }

// ErrorFault implements smithy.APIError.
func (e *Error) ErrorFault() smithy.ErrorFault {
	if e.Status >= 500 {
		return smithy.FaultServer
	}
	return smithy.FaultClient
}

var _ smithy.APIError = (*Error)(nil)

// IsNotFound is whether err says the bucket or the object does not exist.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Code == "NotFound" || e.Code == "NoSuchBucket" || e.Code == "NoSuchKey")
}

// PutInput is an object to put.
type PutInput struct {
	Bucket, Key string
	Body        []byte
	ContentType string
	Metadata    map[string]string // as x-amz-meta-<name>
	// KMSKeyID, when set, has S3 encrypt the object with SSE-KMS under that key.
	KMSKeyID string
}

// PutObject puts an object.
func (c *Client) PutObject(ctx context.Context, in PutInput) error {
	h := http.Header{}
	if in.ContentType != "" {
		h.Set("Content-Type", in.ContentType)
	}
	for k, v := range in.Metadata {
		h.Set("X-Amz-Meta-"+k, v)
	}
	if in.KMSKeyID != "" {
		h.Set("X-Amz-Server-Side-Encryption", "aws:kms")
		h.Set("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id", in.KMSKeyID)
	}
	resp, err := c.do(ctx, "PutObject", http.MethodPut, in.Bucket, in.Key, "", h, in.Body)
	if err != nil {
		return err
	}
	return drain(resp)
}

// GetObject returns the object's content, to be closed by the caller.
func (c *Client) GetObject(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, "GetObject", http.MethodGet, bucket, key, "", nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// HeadObject returns nil when the object exists; an error IsNotFound when not.
func (c *Client) HeadObject(ctx context.Context, bucket, key string) error {
	resp, err := c.do(ctx, "HeadObject", http.MethodHead, bucket, key, "", nil, nil)
	if err != nil {
		return err
	}
	return drain(resp)
}

// HeadBucket returns nil when the bucket exists and the caller may use it; an
// error IsNotFound when it does not exist.
func (c *Client) HeadBucket(ctx context.Context, bucket string) error {
	resp, err := c.do(ctx, "HeadBucket", http.MethodHead, bucket, "", "", nil, nil)
	if err != nil {
		return err
	}
	return drain(resp)
}

// CreateBucket makes a bucket in the client's region.
func (c *Client) CreateBucket(ctx context.Context, bucket string) error {
	var body []byte
	if r := c.cfg.Region; r != "us-east-1" {
		body = []byte(`<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>` +
			xmlText(r) + `</LocationConstraint></CreateBucketConfiguration>`)
	}
	resp, err := c.do(ctx, "CreateBucket", http.MethodPut, bucket, "", "", nil, body)
	if err != nil {
		return err
	}
	return drain(resp)
}

// DeleteBucket deletes an empty bucket.
func (c *Client) DeleteBucket(ctx context.Context, bucket string) error {
	resp, err := c.do(ctx, "DeleteBucket", http.MethodDelete, bucket, "", "", nil, nil)
	if err != nil {
		return err
	}
	return drain(resp)
}

// ListKeys returns up to max keys of the bucket, in S3's order.
func (c *Client) ListKeys(ctx context.Context, bucket string, maxKeys int) ([]string, error) {
	resp, err := c.do(ctx, "ListObjectsV2", http.MethodGet, bucket, "", "list-type=2&max-keys="+strconv.Itoa(maxKeys), nil, nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Contents []struct{ Key string }
	}
	if err := decodeXML(resp, &out); err != nil {
		return nil, fmt.Errorf("s3 ListObjectsV2 of bucket %s: %w", bucket, err)
	}
	keys := make([]string, 0, len(out.Contents))
	for _, o := range out.Contents {
		keys = append(keys, o.Key)
	}
	return keys, nil
}

// DeleteError is one object DeleteObjects could not delete.
type DeleteError struct{ Key, Code, Message string }

// DeleteObjects deletes up to 1,000 objects of the bucket in one call (quiet:
// S3 answers only the failures, returned here).
func (c *Client) DeleteObjects(ctx context.Context, bucket string, keys []string) ([]DeleteError, error) {
	var b strings.Builder
	b.WriteString(`<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
	for _, k := range keys {
		b.WriteString("<Object><Key>" + xmlText(k) + "</Key></Object>")
	}
	b.WriteString("<Quiet>true</Quiet></Delete>")
	body := []byte(b.String())
	sum := md5.Sum(body) //nolint:gosec // required by S3, see the import
	h := http.Header{"Content-Md5": {base64.StdEncoding.EncodeToString(sum[:])}, "Content-Type": {"application/xml"}}
	resp, err := c.do(ctx, "DeleteObjects", http.MethodPost, bucket, "", "delete=", h, body)
	if err != nil {
		return nil, err
	}
	var out struct {
		Error []DeleteError
	}
	if err := decodeXML(resp, &out); err != nil {
		return nil, fmt.Errorf("s3 DeleteObjects in bucket %s: %w", bucket, err)
	}
	return out.Error, nil
}

// do sends one signed request, tried again on a transient failure, and
// returns a 2xx answer or the error S3 answered.
func (c *Client) do(ctx context.Context, op, method, bucket, key, query string, h http.Header, body []byte) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := c.once(ctx, op, method, bucket, key, query, h, body)
		if err == nil || attempt >= c.attempts || !retryable(ctx, err) {
			return resp, err
		}
		delay := time.Duration(100<<attempt) * time.Millisecond // 200 ms, 400 ms, ...
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
	}
}

func (c *Client) once(ctx context.Context, op, method, bucket, key, query string, h http.Header, body []byte) (*http.Response, error) {
	req, err := c.request(ctx, method, bucket, key, query, h, body)
	if err != nil {
		return nil, fmt.Errorf("s3 %s: %w", op, err)
	}
	creds, err := c.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("s3 %s: retrieve the AWS credentials: %w", op, err)
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	if err := c.signer.SignHTTP(ctx, creds, req, payload, "s3", c.cfg.Region, time.Now()); err != nil {
		return nil, fmt.Errorf("s3 %s: sign: %w", op, err)
	}
	hc := c.cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("s3 %s: %w", op, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	return nil, answerError(op, method, resp)
}

// request is the unsigned request: path-style on an endpoint override or for a
// bucket name with a dot, else virtual-hosted on AWS S3.
func (c *Client) request(ctx context.Context, method, bucket, key, query string, h http.Header, body []byte) (*http.Request, error) {
	u := url.URL{Scheme: "https", Host: c.host}
	var prefix string
	switch {
	case c.endpoint != nil:
		u.Scheme, u.Host, prefix = c.endpoint.Scheme, c.endpoint.Host, c.endpoint.Path+"/"+bucket
	case strings.Contains(bucket, "."):
		prefix = "/" + bucket
	default:
		u.Host = bucket + "." + u.Host
	}
	u.Path = prefix + "/" + key
	u.RawPath = escapePath(prefix) + "/" + escapePath(key)
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.ContentLength = int64(len(body))
	if len(body) == 0 {
		req.Body = http.NoBody
	}
	for k, v := range h {
		req.Header[k] = v
	}
	return req, nil
}

// escapePath escapes each segment of p as SigV4 wants for S3 (RFC 3986
// unreserved characters kept, "/" kept between segments).
func escapePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		ch := p[i]
		if ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || strings.IndexByte("-_.~/", ch) >= 0 {
			b.WriteByte(ch)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", ch)
	}
	return b.String()
}

// answerError reads S3's error document (none for HEAD: the status names it).
func answerError(op, method string, resp *http.Response) error {
	defer func() { _ = resp.Body.Close() }()
	e := &Error{Op: op, Status: resp.StatusCode, RequestID: resp.Header.Get("X-Amz-Request-Id")}
	var doc struct{ Code, Message string }
	if method != http.MethodHead {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = xml.Unmarshal(raw, &doc)
	}
	e.Code, e.Message = doc.Code, doc.Message
	if e.Code == "" {
		switch resp.StatusCode {
		case http.StatusNotFound:
			e.Code = "NotFound"
		case http.StatusForbidden:
			e.Code = "Forbidden"
		default:
			e.Code = strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "")
		}
	}
	return e
}

// retryable is whether a failed attempt may succeed when tried again, as the
// SDK's standard retryer judges: a network error (not the caller's
// cancellation), a 5xx answer, throttling or a request timeout.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var e *Error
	if !errors.As(err, &e) {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	switch e.Code {
	case "SlowDown", "RequestTimeout", "Throttling", "ThrottlingException":
		return true
	}
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests
}

func drain(resp *http.Response) error {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.Body.Close()
}

func decodeXML(resp *http.Response, v any) error {
	defer func() { _ = resp.Body.Close() }()
	return xml.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(v)
}

// xmlText escapes s for an XML element's text.
func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
