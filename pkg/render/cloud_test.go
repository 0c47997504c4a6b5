package render_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/intrinsics"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider/aws"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// parseTemplate parses a rendered template with goformation, AWS's CloudFormation
// resource model generated from the CloudFormation resource specification: every
// resource type must be one it knows (not a custom resource), every property name
// must exist on its type (goformation decodes resources with unknown fields
// disallowed) and every value must have the property's type. Intrinsic functions
// stand for a value of the type the property expects: Ref to a List<> parameter for
// a list, any other Ref or Fn::GetAtt for a string (the types they return).
func parseTemplate(t *testing.T, b []byte) *cloudformation.Template {
	t.Helper()
	var raw struct {
		Parameters map[string]struct{ Type string }
		Resources  map[string]struct{ Type string }
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	refValue := func(_ string, input any, _ any) any {
		name, _ := input.(string)
		if p, ok := raw.Parameters[name]; ok && strings.HasPrefix(p.Type, "List<") {
			return []any{"ref:" + name}
		}
		if _, ok := raw.Parameters[name]; !ok {
			if _, ok := raw.Resources[name]; !ok && !strings.HasPrefix(name, "AWS::") {
				t.Errorf("Ref %s names neither a parameter nor a resource", name)
			}
		}
		return "ref:" + name
	}
	getAtt := func(_ string, input any, _ any) any {
		args, _ := input.([]any)
		if len(args) != 2 {
			t.Errorf("Fn::GetAtt %v: expected [resource, attribute]", input)
			return ""
		}
		if _, ok := raw.Resources[args[0].(string)]; !ok {
			t.Errorf("Fn::GetAtt %v names no resource", args)
		}
		return "getatt:" + args[0].(string) + "." + args[1].(string)
	}
	tmpl, err := goformation.ParseJSONWithOptions(b, &intrinsics.ProcessorOptions{
		IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{"Ref": refValue, "Fn::GetAtt": getAtt},
	})
	if err != nil {
		t.Fatalf("goformation does not accept the template: %v", err)
	}
	for id, r := range tmpl.Resources {
		if c, ok := r.(*cloudformation.CustomResource); ok {
			t.Errorf("resource %s: type %s is not a CloudFormation resource type goformation knows", id, c.Type)
		}
	}
	return tmpl
}

// TestCloudTemplateDeployable checks that the template has what a deploy needs and
// that CloudFormation's resource model accepts every resource, for a created network
// and for an existing one given as values.
func TestCloudTemplateDeployable(t *testing.T) {
	for _, tc := range []struct {
		name string
		aws  v1alpha1.AWSProvider
	}{
		{"new network", v1alpha1.AWSProvider{ImageID: "ami-0123456789abcdef0", InstanceType: "m7i.xlarge"}},
		{"existing network", v1alpha1.AWSProvider{VPCID: "vpc-0123456789abcdef0", SubnetIDs: []string{"subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := fullInput(t)
			in.Provider = &v1alpha1.Provider{AWS: &tc.aws}
			b := mustRender(t, in)["cloud/template.json"]
			tmpl := parseTemplate(t, b)

			// The values are parameter defaults.
			wantDefault := map[string]any{"WorkerInstanceType": "m6i.large", "ControlPlaneInstanceType": "m6i.large"}
			if tc.aws.InstanceType != "" {
				wantDefault["WorkerInstanceType"] = tc.aws.InstanceType
			}
			if tc.aws.ImageID != "" {
				wantDefault["ImageId"] = tc.aws.ImageID
			}
			if tc.aws.VPCID != "" {
				wantDefault["VpcId"] = tc.aws.VPCID
				wantDefault["SubnetIds"] = strings.Join(tc.aws.SubnetIDs, ",")
			} else {
				wantDefault["VpcCidr"] = "10.0.0.0/16"
			}
			for name, want := range wantDefault {
				if p, ok := tmpl.Parameters[name]; !ok || p.Default != want {
					t.Errorf("parameter %s: default %v, want %v", name, p.Default, want)
				}
			}

			types := map[string]int{}
			for _, r := range tmpl.Resources {
				types[r.AWSCloudFormationType()]++
			}
			want := map[string]int{
				"AWS::EC2::SecurityGroup":                   2,
				"AWS::ElasticLoadBalancingV2::LoadBalancer": 1,
				"AWS::ElasticLoadBalancingV2::TargetGroup":  1,
				"AWS::ElasticLoadBalancingV2::Listener":     1,
				"AWS::IAM::Role":                            3, // one per pool
				"AWS::IAM::InstanceProfile":                 3,
				"AWS::EC2::LaunchTemplate":                  3, // control-plane, gpu-nodes, workers
				"AWS::AutoScaling::AutoScalingGroup":        3,
			}
			if tc.aws.VPCID == "" {
				want["AWS::EC2::VPC"], want["AWS::EC2::Subnet"], want["AWS::EC2::InternetGateway"] = 1, 2, 1
			} else {
				want["AWS::EC2::VPC"], want["AWS::EC2::Subnet"] = 0, 0
			}
			for typ, n := range want {
				if types[typ] != n {
					t.Errorf("%d resources of type %s, want %d", types[typ], typ, n)
				}
			}

			lts := tmpl.GetAllEC2LaunchTemplateResources()
			for id, lt := range lts {
				d := lt.LaunchTemplateData
				if d == nil || d.ImageId == nil || *d.ImageId != "ref:ImageId" || d.InstanceType == nil || !strings.HasSuffix(*d.InstanceType, "InstanceType") ||
					d.UserData == nil || d.IamInstanceProfile == nil || len(d.SecurityGroupIds) != 1 {
					t.Errorf("launch template %s lacks image, instance type, user data, profile or security group: %+v", id, d)
				}
			}
			asgs := tmpl.GetAllAutoScalingAutoScalingGroupResources()
			for id, g := range asgs {
				if len(g.VPCZoneIdentifier) == 0 {
					t.Errorf("node group %s has no subnets", id)
				}
				if cp := id == "ControlPlaneNodeGroup"; cp != (len(g.TargetGroupARNs) == 1) {
					t.Errorf("node group %s: target groups %v; only the control plane's is behind the API server's load balancer", id, g.TargetGroupARNs)
				}
			}
			checkPluginContributions(t, tmpl)
			if _, ok := tmpl.Outputs["APIServerEndpoint"]; !ok {
				t.Error("no APIServerEndpoint output")
			}
		})
	}
}

// checkPluginContributions: the fixture's plugins' resources, IAM statements and
// patches are in the template as before.
func checkPluginContributions(t *testing.T, tmpl *cloudformation.Template) {
	t.Helper()
	roles := tmpl.GetAllIAMRoleResources()
	b, err := json.Marshal(roles["WorkersRole"].Policies)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "ec2:AssignPrivateIpAddresses") {
		t.Errorf("the workers' role lost the cni plugin's IAM statement: %s", b)
	}
	if !strings.Contains(string(b), "logs:PutLogEvents") {
		t.Errorf("the monitoring plugin's patch of the workers' policy is missing: %s", b)
	}
	if _, err := tmpl.GetCertificateManagerCertificateWithName("DexCertificate"); err != nil {
		t.Errorf("the dex plugin's resource: %v", err)
	}
	if _, ok := tmpl.Outputs["DexCertificateArn"]; !ok {
		t.Error("the dex plugin's output is missing")
	}
	g, err := tmpl.GetAutoScalingAutoScalingGroupWithName("WorkersNodeGroup")
	if err != nil {
		t.Fatal(err)
	}
	if g.MaxSize != "6" {
		t.Errorf("WorkersNodeGroup MaxSize %q, want the patch's 6", g.MaxSize)
	}
}

// TestCloudTemplateProtectedPathsAllowOthers: patching next to a protected path (the
// roles' policies, a launch template's instance type) still works.
func TestCloudTemplateProtectedPathsAllowOthers(t *testing.T) {
	m := model.New(model.PoolSpec{Name: "workers", Role: model.RoleWorker, Count: 1})
	c := &model.Contribution{Cloud: &model.Cloud{Patches: []model.Patch{{Ops: []model.PatchOp{
		{Op: "add", Path: "/Resources/WorkersLaunchTemplate/Properties/LaunchTemplateData/InstanceType", Value: "t3.small"},
		{Op: "add", Path: "/Resources/WorkersRole/Properties/Policies/-", Value: map[string]any{"PolicyName": "extra", "PolicyDocument": map[string]any{"Version": "2012-10-17", "Statement": []any{}}}},
	}}}}}
	if d := m.Add("tuning", c); len(d) > 0 {
		t.Fatal(d)
	}
	files := mustRender(t, render.Input{ClusterName: "c", KubernetesVersion: "1.37.2", Model: m, Cloud: aws.Template{}})
	tmpl := parseTemplate(t, files["cloud/template.json"])
	lt, err := tmpl.GetEC2LaunchTemplateWithName("WorkersLaunchTemplate")
	if err != nil {
		t.Fatal(err)
	}
	if got := lt.LaunchTemplateData.InstanceType; got == nil || *got != "t3.small" {
		t.Errorf("instance type %v, want the patch's t3.small", got)
	}
}

// TestCloudContributionsWithoutATemplateAreRefused: a program that links no cloud
// template (a library user without pkg/provider/aws) renders no
// cloud/template.json, and a plugin that contributes to it is refused by name
// rather than dropped.
func TestCloudContributionsWithoutATemplateAreRefused(t *testing.T) {
	m := model.New(model.PoolSpec{Name: "workers", Role: model.RoleWorker, Count: 1})
	files, diags := render.Files(t.Context(), render.Input{ClusterName: "c", KubernetesVersion: "1.37.2", Model: m})
	if diags.HasFatal() {
		t.Fatal(diags)
	}
	if _, ok := files["cloud/template.json"]; ok {
		t.Error("cloud/template.json rendered without a cloud template")
	}
	if d := m.Add("tuning", &model.Contribution{Cloud: &model.Cloud{Outputs: map[string]model.Setting[any]{"Extra": {Value: "x"}}}}); len(d) > 0 {
		t.Fatal(d)
	}
	_, diags = render.Files(t.Context(), render.Input{ClusterName: "c", KubernetesVersion: "1.37.2", Model: m})
	if !diags.HasFatal() || !strings.Contains(diags.String(), "plugin tuning") || !strings.Contains(diags.String(), "no cloud template is registered") {
		t.Fatalf("want a fatal diagnostic naming plugin tuning, got %v", diags)
	}
}
