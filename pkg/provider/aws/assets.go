package aws

import (
	"context"
	"fmt"
	"mime"
	"path"
	"slices"

	"github.com/kubeplug/kubeplug/pkg/s3lite"
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
		_, err = call(ctx, d, "upload "+a.Path+" to "+uri, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, d.c.s3.PutObject(ctx, s3lite.PutInput{
				Bucket: d.opts.Bucket, Key: key, Body: a.Content, ContentType: ctype,
				Metadata: map[string]string{"kubeplug-cluster": d.opts.ClusterName, "kubeplug-path": a.Path},
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
	_, err := call(ctx, d, "look for bucket "+d.opts.Bucket, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.c.s3.HeadBucket(ctx, d.opts.Bucket)
	})
	if err == nil {
		return nil
	}
	if !isNotFound(err) {
		return fmt.Errorf("spec.provider.aws.bucket %s: %w", d.opts.Bucket, err)
	}
	if _, err := call(ctx, d, "create bucket "+d.opts.Bucket, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.c.s3.CreateBucket(ctx, d.opts.Bucket)
	}); err != nil {
		return err
	}
	st.BucketCreated = true
	d.event("asset", "", "created bucket %s in %s", d.opts.Bucket, d.c.region)
	return st.write(d.opts.StateFile)
}

func (d *Deployer) objectExists(ctx context.Context, key string) (bool, error) {
	_, err := call(ctx, d, "look for s3://"+d.opts.Bucket+"/"+key, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.c.s3.HeadObject(ctx, d.opts.Bucket, key)
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
func isNotFound(err error) bool { return s3lite.IsNotFound(err) }

// deleteObjects deletes the objects st records as uploaded by this cluster, and
// the bucket when this cluster created it and nothing else is left in it.
func (d *Deployer) deleteObjects(ctx context.Context, st *State) error {
	for len(st.Objects) > 0 {
		n := min(len(st.Objects), 1000)
		batch := st.Objects[:n]
		failed, err := call(ctx, d, "delete the cluster's objects in bucket "+st.Bucket, func(ctx context.Context) ([]s3lite.DeleteError, error) {
			return d.c.s3.DeleteObjects(ctx, st.Bucket, batch)
		})
		if err != nil && !isNotFound(err) {
			return err
		}
		if len(failed) > 0 {
			e := failed[0]
			return fmt.Errorf("delete s3://%s/%s: %s: %s", st.Bucket, e.Key, e.Code, e.Message)
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
	left, err := call(ctx, d, "list bucket "+st.Bucket, func(ctx context.Context) ([]string, error) {
		return d.c.s3.ListKeys(ctx, st.Bucket, 1)
	})
	if isNotFound(err) {
		st.BucketCreated = false
		return nil
	}
	if err != nil {
		return err
	}
	if len(left) > 0 {
		d.event("asset", "", "kept bucket %s: it holds objects this cluster did not upload", st.Bucket)
		return nil
	}
	if _, err := call(ctx, d, "delete bucket "+st.Bucket, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.c.s3.DeleteBucket(ctx, st.Bucket)
	}); err != nil && !isNotFound(err) {
		return err
	}
	st.BucketCreated = false
	d.event("asset", "", "deleted bucket %s", st.Bucket)
	return nil
}
