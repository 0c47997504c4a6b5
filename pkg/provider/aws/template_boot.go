package aws

import (
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/render"
)

// The boot secrets' part of the cloud template (bootsecrets.go says what they
// are): the KMS key S3 encrypts them with, and for each pool's role an IAM
// policy that lets its instances read their own pools' objects and nothing
// else.

// bootSecretsKeyID is the logical name of the KMS key of the boot secrets; its
// ARN is the core stack's output BootSecretsKeyArn, which up encrypts with.
const (
	bootSecretsKeyID     = "BootSecretsKey"
	bootSecretsKeyOutput = "BootSecretsKeyArn"
)

// bootSecrets adds, for a cluster deployed to aws (spec.provider.aws), the
// boot secrets' KMS key and per pool's role an IAM policy: s3:GetObject on
// the pool's own object (<stackPrefix>/boot/<pool>/*) and
// kms:Decrypt of the key, only through S3. A control plane of more than one
// machine is refused: its etcd members would need peers at addresses an Auto
// Scaling group's machines learn only at boot.
func (t *template) bootSecrets() {
	if t.in.Provider == nil || t.in.Provider.AWS == nil {
		return
	}
	a := t.in.Provider.AWS
	if cp := t.in.Model.Pools[model.ControlPlanePool]; cp != nil && cp.Count > 1 {
		t.in.Fatalf("", "spec.controlPlane.count", "expected 1, found %d: %d control-plane machines on aws need etcd peers at addresses an Auto Scaling group's machines learn only at boot, which the aws provider does not give yet (docs/aws.md)", cp.Count, cp.Count)
		return
	}
	prefix := a.StackPrefix
	if prefix == "" {
		prefix = "kubeplug-" + t.in.ClusterName
	}
	t.put(bootSecretsKeyID, map[string]any{
		"Type": "AWS::KMS::Key",
		"Properties": map[string]any{
			"Description":       "kubeplug " + t.in.ClusterName + ": the machines' boot secrets in S3 (SSE-KMS)",
			"EnableKeyRotation": true,
			// The account administers the key through IAM; the roles below may
			// only decrypt, and only through S3.
			"KeyPolicy": map[string]any{
				"Version": "2012-10-17",
				"Statement": []any{map[string]any{
					"Sid":       "the account administers the key through IAM",
					"Effect":    "Allow",
					"Principal": map[string]any{"AWS": map[string]any{"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}},
					"Action":    "kms:*",
					"Resource":  "*",
				}},
			},
			// No Tags of its own: the stack's tags reach it, and moto 5.2
			// cannot create a key with Key/Value tags (it reads TagKey).
		},
	})
	t.outputs[bootSecretsKeyOutput] = map[string]any{
		"Description": "the KMS key of the machines' boot secrets",
		"Value":       getAtt(bootSecretsKeyID, "Arn"),
	}
	// Every pool has its role (pooldoc.go): each may read only its own
	// pool's object, so a worker never reads the control plane's CA key.
	for _, name := range t.in.Model.PoolNames() {
		id := render.CloudName(name)
		object := map[string]any{"Fn::Sub": "arn:${AWS::Partition}:s3:::" + a.Bucket + "/" + BootSecretsKey(prefix, name)}
		t.put(id+"BootSecretsPolicy", map[string]any{
			"Type": "AWS::IAM::Policy",
			"Properties": map[string]any{
				"PolicyName": "kubeplug-" + name + "-boot-secrets",
				"Roles":      []any{ref(id + "Role")},
				"PolicyDocument": map[string]any{
					"Version": "2012-10-17",
					"Statement": []any{
						map[string]any{"Effect": "Allow", "Action": "s3:GetObject", "Resource": []any{object}},
						map[string]any{
							"Effect": "Allow", "Action": "kms:Decrypt", "Resource": getAtt(bootSecretsKeyID, "Arn"),
							"Condition": map[string]any{"StringEquals": map[string]any{"kms:ViaService": map[string]any{"Fn::Sub": "s3.${AWS::Region}.amazonaws.com"}}},
						},
					},
				},
			},
		})
	}
}

// BootSecretsKey is the object key of pool's boot secrets under prefix (the
// stack prefix).
func BootSecretsKey(prefix, pool string) string {
	return prefix + "/boot/" + pool + "/" + render.BootSecretsFile
}
