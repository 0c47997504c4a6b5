package aws

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/rogpeppe/go-internal/testscript"
)

// awsboot inspects what up left for the machines' boot, through the
// emulator's own APIs:
//
//	awsboot objects BUCKET PREFIX   one line per object under PREFIX with its
//	                                server-side encryption and KMS key
//	awsboot policies                one line per inline policy of every IAM
//	                                role: "policy ROLE NAME DOCUMENT"
//	awsboot userdata DIR            the decoded user data (base64, gzip) of
//	                                every launch template, DIR/<name>.yaml
func awsboot(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: awsboot objects BUCKET PREFIX | policies | userdata DIR")
	}
	ctx := context.Background()
	cfg := sdkConfig(ts)
	var lines []string
	switch {
	case args[0] == "objects" && len(args) == 3:
		s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
		objs, err := s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: sdkaws.String(args[1]), Prefix: sdkaws.String(args[2])})
		ts.Check(err)
		for _, o := range objs.Contents {
			h, err := s3c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: sdkaws.String(args[1]), Key: o.Key})
			ts.Check(err)
			lines = append(lines, fmt.Sprintf("object %s %s %s", sdkaws.ToString(o.Key), h.ServerSideEncryption, sdkaws.ToString(h.SSEKMSKeyId)))
		}
	case args[0] == "policies":
		for _, role := range query(ts, cfg, "iam", "2010-05-08", "ListRoles", "RoleName") {
			for _, name := range queryWith(ts, "iam", "2010-05-08", "ListRolePolicies", "member", url.Values{"RoleName": {role}}) {
				for _, doc := range queryWith(ts, "iam", "2010-05-08", "GetRolePolicy", "PolicyDocument", url.Values{"RoleName": {role}, "PolicyName": {name}}) {
					d, err := url.QueryUnescape(html.UnescapeString(doc))
					ts.Check(err)
					lines = append(lines, fmt.Sprintf("policy %s %s %s", role, name, strings.Join(strings.Fields(d), "")))
				}
			}
		}
	case args[0] == "userdata" && len(args) == 2:
		dir := ts.MkAbs(args[1])
		ts.Check(os.MkdirAll(dir, 0o755))
		for _, name := range query(ts, cfg, "ec2", "2016-11-15", "DescribeLaunchTemplates", "launchTemplateName") {
			for _, ud := range queryWith(ts, "ec2", "2016-11-15", "DescribeLaunchTemplateVersions", "userData", url.Values{"LaunchTemplateName": {name}}) {
				gz, err := base64.StdEncoding.DecodeString(ud)
				ts.Check(err)
				zr, err := gzip.NewReader(bytes.NewReader(gz))
				ts.Check(err)
				b, err := io.ReadAll(zr)
				ts.Check(err)
				ts.Check(os.WriteFile(filepath.Join(dir, name+".yaml"), b, 0o600))
				lines = append(lines, fmt.Sprintf("userdata %s %d bytes", name, len(b)))
			}
		}
	default:
		ts.Fatalf("usage: awsboot objects BUCKET PREFIX | policies | userdata DIR")
	}
	slices.Sort(lines)
	_, _ = fmt.Fprintln(ts.Stdout(), strings.Join(lines, "\n"))
}

// queryWith is query with parameters.
func queryWith(ts *testscript.TestScript, service, version, action, tag string, params url.Values) []string {
	return signedQuery(ts, sdkConfig(ts), service, version, action, tag, params)
}

// tokenof sets $TOKEN to the content of a file (the bootstrap token up keeps
// in the state directory), without its line end.
func tokenof(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: tokenof FILE")
	}
	ts.Setenv("TOKEN", strings.TrimSpace(ts.ReadFile(args[0])))
}

// mode checks a file's permission bits: mode FILE 0600.
func mode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mode FILE PERM")
	}
	fi, err := os.Stat(ts.MkAbs(args[0]))
	ts.Check(err)
	if got := fmt.Sprintf("%04o", fi.Mode().Perm()); got != args[1] {
		ts.Fatalf("%s: mode %s, expected %s", args[0], got, args[1])
	}
}
