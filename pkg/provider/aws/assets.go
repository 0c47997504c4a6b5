package aws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"path"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// objectKey is the key of content in the bucket: under the cluster's prefix, by
// digest, so that the same content is stored once and a changed file is a new
// object (machines booting from the old one keep finding it).
func (d *Deployer) objectKey(content []byte) string {
	return d.opts.StackPrefix + "/sha256/" + digest(content)
}

// upload makes sure the bucket exists and holds every asset, uploading only the
// ones missing. It records the bucket (when it created it) and every object it
// uploaded in st before it goes on.
func (d *Deployer) upload(ctx context.Context, st *State, assets []Asset, res *Result) error {
	if err := d.ensureBucket(ctx, st); err != nil {
		return err
	}
	assets = slices.Clone(assets)
	slices.SortFunc(assets, func(a, b Asset) int { return compare(a.Path, b.Path) })
	st.Assets = map[string]string{}
	for _, a := range assets {
		key := d.objectKey(a.Content)
		uri := "s3://" + d.opts.Bucket + "/" + key
		res.Assets[a.Path], st.Assets[a.Path] = uri, uri
		exists, err := d.objectExists(ctx, key)
		if err != nil {
			return fmt.Errorf("upload %s: %w", a.Path, err)
		}
		if exists {
			res.Existing++
			continue
		}
		ctype := mime.TypeByExtension(path.Ext(a.Path))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		_, err = call(ctx, d, "upload "+a.Path+" to "+uri, func(ctx context.Context) (*s3.PutObjectOutput, error) {
			return d.c.s3.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(d.opts.Bucket), Key: aws.String(key), Body: bytes.NewReader(a.Content),
				ContentType: aws.String(ctype),
				Metadata:    map[string]string{"kubeplug-cluster": d.opts.ClusterName, "kubeplug-path": a.Path},
			})
		})
		if err != nil {
			return err
		}
		st.Objects = append(st.Objects, key)
		if err := st.write(d.opts.StateFile); err != nil {
			return err
		}
		res.Uploaded++
		d.event("asset", "", "uploaded %s to %s (%d bytes)", a.Path, uri, len(a.Content))
	}
	if len(assets) > 0 {
		d.event("asset", "", "%d files in s3://%s/%s/sha256/: %d uploaded, %d there already", len(assets), d.opts.Bucket, d.opts.StackPrefix, res.Uploaded, res.Existing)
	}
	return st.write(d.opts.StateFile)
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ensureBucket creates the bucket when it does not exist and records that.
func (d *Deployer) ensureBucket(ctx context.Context, st *State) error {
	_, err := call(ctx, d, "look for bucket "+d.opts.Bucket, func(ctx context.Context) (*s3.HeadBucketOutput, error) {
		return d.c.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(d.opts.Bucket)})
	})
	if err == nil {
		return nil
	}
	if !isNotFound(err) {
		return fmt.Errorf("spec.provider.aws.bucket %s: %w", d.opts.Bucket, err)
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(d.opts.Bucket)}
	if d.c.region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(d.c.region)}
	}
	if _, err := call(ctx, d, "create bucket "+d.opts.Bucket, func(ctx context.Context) (*s3.CreateBucketOutput, error) {
		return d.c.s3.CreateBucket(ctx, in)
	}); err != nil {
		return err
	}
	st.BucketCreated = true
	d.event("asset", "", "created bucket %s in %s", d.opts.Bucket, d.c.region)
	return st.write(d.opts.StateFile)
}

func (d *Deployer) objectExists(ctx context.Context, key string) (bool, error) {
	_, err := call(ctx, d, "look for s3://"+d.opts.Bucket+"/"+key, func(ctx context.Context) (*s3.HeadObjectOutput, error) {
		return d.c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.opts.Bucket), Key: aws.String(key)})
	})
	if err == nil {
		return true, nil
	}
	if isNotFound(err) {
		return false, nil
	}
	return false, err
}

// isNotFound is whether an S3 error says the bucket or object does not exist.
func isNotFound(err error) bool {
	var nf *s3types.NotFound
	var nsb *s3types.NoSuchBucket
	var nsk *s3types.NoSuchKey
	if errors.As(err, &nf) || errors.As(err, &nsb) || errors.As(err, &nsk) {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "NotFound" || ae.ErrorCode() == "NoSuchBucket" || ae.ErrorCode() == "NoSuchKey")
}

// deleteObjects deletes the objects st records as uploaded by this cluster, and
// the bucket when this cluster created it and nothing else is left in it.
func (d *Deployer) deleteObjects(ctx context.Context, st *State) error {
	for len(st.Objects) > 0 {
		n := min(len(st.Objects), 1000)
		batch := st.Objects[:n]
		ids := make([]s3types.ObjectIdentifier, 0, n)
		for _, k := range batch {
			ids = append(ids, s3types.ObjectIdentifier{Key: aws.String(k)})
		}
		out, err := call(ctx, d, "delete the cluster's objects in bucket "+st.Bucket, func(ctx context.Context) (*s3.DeleteObjectsOutput, error) {
			return d.c.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(st.Bucket), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		})
		if err != nil && !isNotFound(err) {
			return err
		}
		if out != nil && len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("delete s3://%s/%s: %s: %s", st.Bucket, aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
		st.Objects = st.Objects[n:]
		d.event("asset", "", "deleted %d objects from s3://%s", n, st.Bucket)
		if err := st.write(d.opts.StateFile); err != nil {
			return err
		}
	}
	st.Assets = nil
	if !st.BucketCreated {
		return nil
	}
	list, err := call(ctx, d, "list bucket "+st.Bucket, func(ctx context.Context) (*s3.ListObjectsV2Output, error) {
		return d.c.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(st.Bucket), MaxKeys: aws.Int32(1)})
	})
	if isNotFound(err) {
		st.BucketCreated = false
		return nil
	}
	if err != nil {
		return err
	}
	if len(list.Contents) > 0 {
		d.event("asset", "", "kept bucket %s: it holds objects this cluster did not upload", st.Bucket)
		return nil
	}
	if _, err := call(ctx, d, "delete bucket "+st.Bucket, func(ctx context.Context) (*s3.DeleteBucketOutput, error) {
		return d.c.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(st.Bucket)})
	}); err != nil && !isNotFound(err) {
		return err
	}
	st.BucketCreated = false
	d.event("asset", "", "deleted bucket %s", st.Bucket)
	return nil
}
