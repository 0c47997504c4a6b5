package aws

import (
	"encoding/json"
	"maps"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/provider"
	"github.com/kubeplug/kubeplug/pkg/render"
)

func init() { provider.RegisterCloudTemplate(Template{}) }

// Template is the cloud template kubeplug renders for every cluster (render's
// cloud/template.json) and kubeplug up deploys on aws as the core stack.
type Template struct{}

// Values are the values of the cloud template; each is the default of a
// template parameter, so that a deploy can override it. They are the built-in
// cloud plugin's values (plugins/cloud: its defaults, or the cluster's values
// of it) with spec.provider.aws's fields, where set, over them.
type Values struct {
	// ImageID is the machine image of every machine; empty leaves the ImageId
	// parameter without a default.
	ImageID string
	// InstanceType of worker pools, ControlPlaneInstanceType of the control plane.
	InstanceType, ControlPlaneInstanceType string
	// VPCID and SubnetIDs name an existing network; empty creates a VPC of VPCCIDR
	// with a public subnet in each of two availability zones.
	VPCID     string
	SubnetIDs []string
	VPCCIDR   string
	// APIServerCIDR may reach the API server's load balancer.
	APIServerCIDR string
	// vpcCIDRField is where VPCCIDR was written, for a diagnostic.
	vpcCIDRField string
}

// values are the template's values: the cloud plugin's, with a cluster's
// spec.provider.aws fields over them.
func values(p *v1alpha1.Provider, cv coreValues) Values {
	v := Values{InstanceType: cv.InstanceType, ControlPlaneInstanceType: cv.ControlPlaneInstanceType,
		VPCCIDR: cv.VPCCIDR, APIServerCIDR: cv.APIServerCIDR, vpcCIDRField: "values.vpcCIDR"}
	if p == nil || p.AWS == nil {
		return v
	}
	a := p.AWS
	v.ImageID, v.VPCID, v.SubnetIDs = a.ImageID, a.VPCID, a.SubnetIDs
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&v.InstanceType, a.InstanceType}, {&v.ControlPlaneInstanceType, a.ControlPlaneInstanceType},
		{&v.VPCCIDR, a.VPCCIDR}, {&v.APIServerCIDR, a.APIServerCIDR},
	} {
		if f.src != "" {
			*f.dst = f.src
		}
	}
	if a.VPCCIDR != "" {
		v.vpcCIDRField = "spec.provider.aws.vpcCIDR"
	}
	return v
}

// roleIDs are the logical-name prefixes of the resources generated per machine role.
var roleIDs = map[string]string{model.RoleControlPlane: "ControlPlane", model.RoleWorker: "Worker"}

// Ports and names of the core's cloud resources that plugins may rely on.
const (
	apiServerPort = 6443
	// protectedUserData and protectedTrust say why a patch may not change these paths.
	protectedUserData = "a pool's user data is its rendered node configuration (nodes/<pool>/cloud-init.yaml); change the machines through node contributions, which the render checks"
	protectedTrust    = "the core's IAM trust policy decides who may act as the cluster's machines; add permissions through cloud.iam statements instead"
)

// Template builds cloud/template.json, a CloudFormation template that deploys the
// cluster's machines, in named steps: the parameters, the network (a VPC with
// two public subnets, or an existing one given as values), security groups, a
// network load balancer for the API server, per pool an IAM role and instance
// profile, a launch template and an Auto Scaling group in the subnets, built
// from the pool's cloud document (pooldoc.go: the cloud plugin's parts and the
// plugins' cloud.pools[] parts, by name), then the plugins' resources and
// outputs. The values of spec.provider.aws become parameter
// defaults, so a deploy can override them. Render then applies the plugins'
// patches; the paths returned as protected (a pool's UserData, a role's
// AssumeRolePolicyDocument) no patch may change.
func (Template) Template(in render.CloudInput) ([]byte, map[string]string) {
	cv, err := decodeCoreValues(in.Values)
	if err != nil {
		in.Fatalf(CloudPlugin, "values", "%v", err)
		return nil, nil
	}
	t := &template{
		in: in, cv: cv, v: values(in.Provider, cv),
		resources: map[string]any{}, parameters: map[string]any{}, outputs: map[string]any{},
		core: map[string]bool{}, protected: map[string]string{},
	}
	t.params()
	if !t.network() {
		return nil, nil
	}
	for _, step := range []func(){t.securityGroups, t.loadBalancer, t.checkIAMRoles, t.checkParts, t.pools, t.bootSecrets, t.plugins} {
		step()
	}
	doc, err := json.Marshal(map[string]any{
		"AWSTemplateFormatVersion": "2010-09-09",
		"Description":              "kubeplug cluster " + in.ClusterName,
		"Parameters":               t.parameters,
		"Resources":                t.resources,
		"Outputs":                  t.outputs,
	})
	if err != nil {
		in.Fatalf("", "cloud", "encoding the cloud template: %v", err)
		return nil, nil
	}
	return doc, t.protected
}

// template is the cloud template while its steps build it.
type template struct {
	in render.CloudInput
	v  Values
	// cv are the cloud plugin's values: the seeds of every pool's cloud document.
	cv coreValues
	// resources, parameters and outputs are the template's sections; core marks
	// the resources the steps made (a plugin may not replace one); protected
	// maps a JSON pointer to why no patch may change it.
	resources, parameters, outputs map[string]any
	core                           map[string]bool
	protected                      map[string]string
	// vpc and subnets are what resources reference for the network.
	vpc, subnets any
}

// put adds one of the core's resources.
func (t *template) put(id string, v any) {
	t.resources[id] = v
	t.core[id] = true
}

// tags are the cluster's tag and the extra key-value pairs given.
func (t *template) tags(extra ...string) []any {
	out := []any{map[string]any{"Key": "kubeplug.dev/cluster", "Value": t.in.ClusterName}}
	for i := 0; i+1 < len(extra); i += 2 {
		out = append(out, map[string]any{"Key": extra[i], "Value": extra[i+1]})
	}
	return out
}

// params are the parameters every template has: the image and instance types.
func (t *template) params() {
	image := map[string]any{
		"Type":        "AWS::EC2::Image::Id",
		"Description": "the machine image of every machine, with the kubelet, containerd and " + render.AgentPath,
	}
	if t.v.ImageID != "" {
		image["Default"] = t.v.ImageID
	}
	t.parameters["ImageId"] = image
	t.parameters["ControlPlaneInstanceType"] = map[string]any{"Type": "String", "Default": t.v.ControlPlaneInstanceType, "Description": "the control-plane machines' instance type"}
	t.parameters["WorkerInstanceType"] = map[string]any{"Type": "String", "Default": t.v.InstanceType, "Description": "the worker machines' instance type"}
	t.parameters["APIServerCidr"] = map[string]any{"Type": "String", "Default": t.v.APIServerCIDR, "Description": "the addresses that may reach the API server"}
}

// securityGroups: the API server's port from APIServerCidr, everything between
// the cluster's machines. Ingress between the groups is a resource of its own so
// that the groups do not reference each other.
func (t *template) securityGroups() {
	t.put("ControlPlaneSecurityGroup", map[string]any{
		"Type": "AWS::EC2::SecurityGroup",
		"Properties": map[string]any{
			"GroupDescription": "kubeplug " + t.in.ClusterName + " control plane",
			"VpcId":            t.vpc,
			"SecurityGroupIngress": []any{map[string]any{
				"IpProtocol": "tcp", "FromPort": apiServerPort, "ToPort": apiServerPort, "CidrIp": ref("APIServerCidr"),
				"Description": "the API server, through its load balancer",
			}},
			"Tags": t.tags(),
		},
	})
	t.put("WorkerSecurityGroup", map[string]any{
		"Type": "AWS::EC2::SecurityGroup",
		"Properties": map[string]any{
			"GroupDescription": "kubeplug " + t.in.ClusterName + " workers",
			"VpcId":            t.vpc,
			"Tags":             t.tags(),
		},
	})
	for _, to := range []string{"ControlPlane", "Worker"} {
		for _, from := range []string{"ControlPlane", "Worker"} {
			t.put(to+"IngressFrom"+from, map[string]any{
				"Type": "AWS::EC2::SecurityGroupIngress",
				"Properties": map[string]any{
					"GroupId":               getAtt(to+"SecurityGroup", "GroupId"),
					"SourceSecurityGroupId": getAtt(from+"SecurityGroup", "GroupId"),
					"IpProtocol":            "-1",
					"Description":           "all traffic between the cluster's machines",
				},
			})
		}
	}
}

// loadBalancer is the API server's network load balancer (TCP passthrough to the
// control-plane machines), and the outputs that name it and the VPC.
func (t *template) loadBalancer() {
	t.put("APIServerLoadBalancer", map[string]any{
		"Type": "AWS::ElasticLoadBalancingV2::LoadBalancer",
		"Properties": map[string]any{
			"Type":    "network",
			"Scheme":  "internet-facing",
			"Subnets": t.subnets,
			"Tags":    t.tags(),
		},
	})
	t.put("APIServerTargetGroup", map[string]any{
		"Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
		"Properties": map[string]any{
			"Port":                apiServerPort,
			"Protocol":            "TCP",
			"TargetType":          "instance",
			"VpcId":               t.vpc,
			"HealthCheckProtocol": "TCP",
			"Tags":                t.tags(),
		},
	})
	t.put("APIServerListener", map[string]any{
		"Type": "AWS::ElasticLoadBalancingV2::Listener",
		"Properties": map[string]any{
			"LoadBalancerArn": ref("APIServerLoadBalancer"),
			"Port":            apiServerPort,
			"Protocol":        "TCP",
			"DefaultActions":  []any{map[string]any{"Type": "forward", "TargetGroupArn": ref("APIServerTargetGroup")}},
		},
	})
	t.outputs["APIServerEndpoint"] = map[string]any{
		"Description": "the API server's address",
		"Value":       map[string]any{"Fn::Join": []any{"", []any{"https://", getAtt("APIServerLoadBalancer", "DNSName"), ":" + strconv.Itoa(apiServerPort)}}},
	}
	t.outputs["VpcId"] = map[string]any{"Description": "the cluster's VPC", "Value": t.vpc}
}

// checkIAMRoles refuses cloud.iam statements for a role that is neither a
// machine role nor a pool's name, which would otherwise land nowhere.
func (t *template) checkIAMRoles() {
	for _, role := range sortedKeys(t.in.Model.Cloud.IAM) {
		if _, ok := roleIDs[role]; ok {
			continue
		}
		if _, ok := t.in.Model.Pools[role]; ok {
			continue
		}
		for _, s := range t.in.Model.Cloud.IAM[role] {
			t.in.Fatalf(s.By, "cloud.iam."+role, "expected role %s, %s or a node pool's name (%s), found %q", model.RoleControlPlane, model.RoleWorker, strings.Join(t.in.Model.PoolNames(), ", "), role)
		}
	}
}

// pools are, per pool, an IAM role and instance profile, a security group of
// its own when its cloud document has ingress rules, a launch template and an
// Auto Scaling group, from the pool's cloud document; the user data is a
// parameter (the pool's rendered cloud-init.yaml) no patch may change.
func (t *template) pools() {
	pools := map[string]string{} // logical-name prefix -> pool
	for _, name := range t.in.Model.PoolNames() {
		p := t.in.Model.Pools[name]
		id := render.CloudName(name)
		if prev, ok := pools[id]; ok {
			t.in.Fatalf("", "nodes."+name, "pools %s and %s both map to cloud resource names %s...", prev, name, id)
			continue
		}
		pools[id] = name
		roleID, ok := roleIDs[p.Role]
		if !ok {
			t.in.Fatalf("", "nodes."+name+".role", "expected role %s or %s, found %q", model.RoleControlPlane, model.RoleWorker, p.Role)
			continue
		}
		doc, ok := t.poolDocument(p)
		if !ok {
			continue
		}
		t.poolRole(id, p, doc)
		groups := []any{getAtt(roleID+"SecurityGroup", "GroupId")}
		if g := t.poolSecurityGroup(id, p, doc); g != nil {
			groups = append(groups, g)
		}
		// The user data is the pool's rendered node configuration; the deployer passes
		// it as a parameter because it is too large to inline and is reviewed on its own.
		t.parameters[id+"UserData"] = map[string]any{
			"Type":        "String",
			"Description": "base64 of nodes/" + name + "/cloud-init.yaml",
		}
		data := maps.Clone(doc.sections[partLaunchTemplate])
		data["ImageId"] = ref("ImageId")
		data["IamInstanceProfile"] = map[string]any{"Arn": getAtt(id+"InstanceProfile", "Arn")}
		data["SecurityGroupIds"] = groups
		data["UserData"] = ref(id + "UserData")
		t.put(id+"LaunchTemplate", map[string]any{
			"Type": "AWS::EC2::LaunchTemplate",
			"Properties": map[string]any{
				"LaunchTemplateName": t.in.ClusterName + "-" + name,
				"LaunchTemplateData": data,
			},
		})
		t.protected["/Resources/"+id+"LaunchTemplate/Properties/LaunchTemplateData/UserData"] = protectedUserData
		count := strconv.Itoa(p.Count)
		group := map[string]any{
			"LaunchTemplate": map[string]any{
				"LaunchTemplateId": ref(id + "LaunchTemplate"),
				"Version":          getAtt(id+"LaunchTemplate", "LatestVersionNumber"),
			},
			"MinSize":           bound(p.MinSize, p.Count),
			"MaxSize":           bound(p.MaxSize, p.Count),
			"DesiredCapacity":   count,
			"VPCZoneIdentifier": t.subnets,
			"Tags":              groupTags(t.in.ClusterName, name, doc),
		}
		if p.Role == model.RoleControlPlane {
			group["TargetGroupARNs"] = []any{ref("APIServerTargetGroup")}
		}
		t.put(id+"NodeGroup", map[string]any{"Type": "AWS::AutoScaling::AutoScalingGroup", "Properties": group})
	}
}

// plugins adds the plugins' resources and outputs; replacing one of the core's
// is fatal.
func (t *template) plugins() {
	for _, id := range sortedKeys(t.in.Model.Cloud.Resources) {
		s := t.in.Model.Cloud.Resources[id]
		if t.core[id] {
			t.in.Fatalf(s.By, "cloud.resources."+id, "resource %s is generated by kubeplug; change it with a patch instead", id)
			continue
		}
		t.resources[id] = s.Value
	}
	for _, id := range sortedKeys(t.in.Model.Cloud.Outputs) {
		if _, ok := t.outputs[id]; ok {
			t.in.Fatalf(t.in.Model.Cloud.Outputs[id].By, "cloud.outputs."+id, "output %s is generated by kubeplug", id)
			continue
		}
		t.outputs[id] = t.in.Model.Cloud.Outputs[id].Value
	}
}

// bound is a pool's autoscaling bound (cluster.yaml's minSize or maxSize), else
// its count: a pool without bounds does not scale.
func bound(v *int, count int) string {
	if v != nil {
		return strconv.Itoa(*v)
	}
	return strconv.Itoa(count)
}

// network adds the cluster's network: parameters naming an existing VPC and its
// subnets, or a VPC with an internet gateway and a public subnet in each of the
// region's first two availability zones, each half of VpcCidr. It returns what
// resources reference for the VPC and the subnets.
func (t *template) network() bool {
	if t.v.VPCID != "" {
		t.parameters["VpcId"] = map[string]any{"Type": "AWS::EC2::VPC::Id", "Default": t.v.VPCID, "Description": "the existing VPC of the cluster"}
		t.parameters["SubnetIds"] = map[string]any{"Type": "List<AWS::EC2::Subnet::Id>", "Default": strings.Join(t.v.SubnetIDs, ","), "Description": "the t.subnets of the machines and the API server's load balancer"}
		t.vpc, t.subnets = ref("VpcId"), ref("SubnetIds")
		return true
	}
	prefix, err := netip.ParsePrefix(t.v.VPCCIDR)
	if err != nil || !prefix.Addr().Is4() || prefix.Bits() < 16 || prefix.Bits() > 27 {
		by := CloudPlugin
		if t.v.vpcCIDRField != "values.vpcCIDR" {
			by = ""
		}
		t.in.Fatalf(by, t.v.vpcCIDRField, "expected an IPv4 range from /16 to /27 such as 10.0.0.0/16, found %q", t.v.VPCCIDR)
		return false
	}
	t.parameters["VpcCidr"] = map[string]any{"Type": "String", "Default": t.v.VPCCIDR, "Description": "the address range of the cluster's VPC"}
	t.put("VPC", map[string]any{
		"Type": "AWS::EC2::VPC",
		"Properties": map[string]any{
			"CidrBlock":          ref("VpcCidr"),
			"EnableDnsSupport":   true,
			"EnableDnsHostnames": true,
			"Tags":               t.tags("Name", t.in.ClusterName),
		},
	})
	t.put("InternetGateway", map[string]any{"Type": "AWS::EC2::InternetGateway", "Properties": map[string]any{"Tags": t.tags()}})
	t.put("InternetGatewayAttachment", map[string]any{
		"Type":       "AWS::EC2::VPCGatewayAttachment",
		"Properties": map[string]any{"VpcId": ref("VPC"), "InternetGatewayId": ref("InternetGateway")},
	})
	t.put("PublicRouteTable", map[string]any{
		"Type":       "AWS::EC2::RouteTable",
		"Properties": map[string]any{"VpcId": ref("VPC"), "Tags": t.tags()},
	})
	t.put("PublicRoute", map[string]any{
		"Type":      "AWS::EC2::Route",
		"DependsOn": "InternetGatewayAttachment",
		"Properties": map[string]any{
			"RouteTableId":         ref("PublicRouteTable"),
			"DestinationCidrBlock": "0.0.0.0/0",
			"GatewayId":            ref("InternetGateway"),
		},
	})
	var list []any
	for i := range 2 {
		id := "Subnet" + strconv.Itoa(i)
		t.put(id, map[string]any{
			"Type": "AWS::EC2::Subnet",
			"Properties": map[string]any{
				"VpcId":               ref("VPC"),
				"AvailabilityZone":    map[string]any{"Fn::Select": []any{i, map[string]any{"Fn::GetAZs": ""}}},
				"CidrBlock":           map[string]any{"Fn::Select": []any{i, map[string]any{"Fn::Cidr": []any{ref("VpcCidr"), 2, strconv.Itoa(32 - prefix.Bits() - 1)}}}},
				"MapPublicIpOnLaunch": true,
				"Tags":                t.tags(),
			},
		})
		t.put(id+"RouteTableAssociation", map[string]any{
			"Type":       "AWS::EC2::SubnetRouteTableAssociation",
			"Properties": map[string]any{"SubnetId": ref(id), "RouteTableId": ref("PublicRouteTable")},
		})
		list = append(list, ref(id))
	}
	t.vpc, t.subnets = ref("VPC"), list
	return true
}

func ref(id string) map[string]any { return map[string]any{"Ref": id} }

func getAtt(id, attr string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, attr}} }
