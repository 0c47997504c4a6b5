// Package s3fetch lets the node agent download s3:// hook scripts: importing
// it registers the scheme with nodeagent.RegisterScheme. It is the node agent's
// only link to the AWS SDK (its configuration chain and signer, through
// pkg/s3lite), so that a program that runs no node (the controller's binary)
// links none.
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

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go"

	"github.com/kubeplug/kubeplug/pkg/nodeagent"
	"github.com/kubeplug/kubeplug/pkg/s3lite"
)

func init() { nodeagent.RegisterScheme("s3", open) }

// clients are the S3 clients made so far, by endpoint ("" for AWS S3).
var (
	mu      sync.Mutex
	clients = map[string]*s3lite.Client{}
)

// open starts the download of the object u names (s3://bucket/key).
func open(ctx context.Context, u *url.URL, opts *nodeagent.Options) (io.ReadCloser, error) {
	c, err := client(ctx, opts.S3Endpoint)
	if err != nil {
		return nil, err
	}
	body, err := c.GetObject(ctx, u.Host, strings.TrimPrefix(u.Path, "/"))
	if err != nil {
		if notThereYet(err) {
			err = fmt.Errorf("%w: %w", nodeagent.ErrNotThereYet, err)
		}
		return nil, fmt.Errorf("get the s3 object: %w", err)
	}
	return body, nil
}

// notThereYet says whether err may be an object not uploaded yet: S3 answers
// 404 NoSuchKey, or 403 AccessDenied to a role that may not list the bucket.
func notThereYet(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "AccessDenied")
}

// client is the S3 client of endpoint, made on first use. The node agent
// downloads hooks: the content's sha256 checks them, not S3's checksums.
func client(ctx context.Context, endpoint string) (*s3lite.Client, error) {
	mu.Lock()
	defer mu.Unlock()
	if c := clients[endpoint]; c != nil {
		return c, nil
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the aws configuration: %w", err)
	}
	// Signing needs a region (s3lite takes us-east-1 when none is set); an
	// S3-compatible store, addressed path-style, mostly ignores it.
	c, err := s3lite.New(ctx, cfg, endpoint)
	if err != nil {
		return nil, err
	}
	clients[endpoint] = c
	return c, nil
}
