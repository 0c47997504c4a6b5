// Package s3fetch lets the node agent download s3:// hook scripts: importing
// it registers the scheme with nodeagent.RegisterScheme. It is the node agent's
// only link to the AWS SDK, so that a program that runs no node (the
// controller's binary) links none.
//
// The client comes from the SDK's default configuration (environment, shared
// files, the instance's role), made on first use, so that a machine without
// s3 hooks never looks for credentials; nodeagent.Options.S3Endpoint points it
// at an S3-compatible store, addressed path-style.
package s3fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/kubeplug/kubeplug/pkg/nodeagent"
)

func init() { nodeagent.RegisterScheme("s3", open) }

// clients are the S3 clients made so far, by endpoint ("" for AWS S3).
var (
	mu      sync.Mutex
	clients = map[string]*s3.Client{}
)

// open starts the download of the object u names (s3://bucket/key).
func open(ctx context.Context, u *url.URL, opts *nodeagent.Options) (io.ReadCloser, error) {
	c, err := client(ctx, opts.S3Endpoint)
	if err != nil {
		return nil, err
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(u.Host), Key: aws.String(strings.TrimPrefix(u.Path, "/"))})
	if err != nil {
		if notThereYet(err) {
			err = fmt.Errorf("%w: %w", nodeagent.ErrNotThereYet, err)
		}
		return nil, fmt.Errorf("get the s3 object: %w", err)
	}
	return out.Body, nil
}

// notThereYet says whether err may be an object not uploaded yet: S3 answers
// 404 NoSuchKey, or 403 AccessDenied to a role that may not list the bucket.
func notThereYet(err error) bool {
	var nsk *s3types.NoSuchKey
	var api smithy.APIError
	return errors.As(err, &nsk) || (errors.As(err, &api) && api.ErrorCode() == "AccessDenied")
}

// client is the S3 client of endpoint, made on first use.
func client(ctx context.Context, endpoint string) (*s3.Client, error) {
	mu.Lock()
	defer mu.Unlock()
	if c := clients[endpoint]; c != nil {
		return c, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the aws configuration: %w", err)
	}
	if cfg.Region == "" {
		// Signing needs a region; an S3-compatible store mostly ignores it.
		cfg.Region = "us-east-1"
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		// The hook's sha256 checks the content; S3-compatible stores often send
		// no checksum, and the SDK would log that on every download.
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			// S3-compatible stores rarely serve bucket.host names.
			o.UsePathStyle = true
		}
	})
	clients[endpoint] = c
	return c, nil
}
