package aws

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/kubeplug/kubeplug/pkg/model"
)

// A pool's cloud document is what the template builds a pool's resources from,
// by name, so that plugins set and patch it by name instead of by the logical
// names generated from the pool's name:
//
//	{
//	  "iam":                  {NAME: statement},  // the pool's IAM role's policy
//	  "tags":                 {KEY: value},       // its Auto Scaling group's tags
//	  "securityGroupIngress": {NAME: rule},       // a security group of the pool's own
//	  "launchTemplate":       {PROPERTY: value}   // its LaunchTemplateData
//	}
//
// The built-in cloud plugin's values seed it (launchTemplate, iam of the pool's
// role, tags, and the InstanceType parameter of the pool's role); then every
// plugin's cloud.pools[] part that selects the pool sets its entries (a name
// already set is a conflict), then their patches apply, in plugin order.
const (
	partIAM            = "iam"
	partTags           = "tags"
	partIngress        = "securityGroupIngress"
	partLaunchTemplate = "launchTemplate"
)

// poolSections are the sections of a pool's cloud document, in order.
var poolSections = []string{partIAM, partTags, partIngress, partLaunchTemplate}

// reservedLaunchTemplate are the LaunchTemplateData properties kubeplug sets,
// each with why a part may not.
var reservedLaunchTemplate = map[string]string{
	"UserData":           protectedUserData,
	"ImageId":            "every machine boots the image of the ImageId parameter (spec.provider.aws.imageID)",
	"IamInstanceProfile": "the pool's instance profile carries its IAM role; add statements through its iam part",
	"SecurityGroupIds":   "the pool's security groups are its role's and its own; add rules through its securityGroupIngress part",
}

// poolDoc is a pool's cloud document, with who set each entry.
type poolDoc struct {
	sections map[string]map[string]any
	// setBy maps "section/name" to the plugin that set it.
	setBy map[string]string
}

// poolDocument builds the cloud document of pool p; ok is false when a part or
// patch failed, reported through Fatalf.
func (t *template) poolDocument(p *model.Pool) (*poolDoc, bool) {
	d := &poolDoc{sections: map[string]map[string]any{}, setBy: map[string]string{}}
	seed := map[string]map[string]any{
		partIAM:            t.cv.IAM[p.Role],
		partLaunchTemplate: t.cv.LaunchTemplate,
		partIngress:        nil,
		partTags:           {},
	}
	for k, v := range t.cv.Tags {
		seed[partTags][k] = v
	}
	for _, s := range poolSections {
		d.sections[s] = map[string]any{}
		for k, v := range seed[s] {
			d.sections[s][k] = v
			d.setBy[s+"/"+k] = CloudPlugin
		}
	}
	if _, ok := d.sections[partLaunchTemplate]["InstanceType"]; !ok {
		d.sections[partLaunchTemplate]["InstanceType"] = ref(roleIDs[p.Role] + "InstanceType")
		d.setBy[partLaunchTemplate+"/InstanceType"] = CloudPlugin
	}
	ok := true
	t.eachPart(p, func(part model.PoolPart, field string) {
		for _, s := range poolSections {
			for _, name := range sortedKeys(partSection(part, s)) {
				if prev, set := d.setBy[s+"/"+name]; set {
					t.in.Fatalf(part.By, field+"."+s+"."+name, "pool %s: %s %s is already set by plugin %s: patch it by name instead (cloud.pools[].patches: [{op: replace, path: /%s/%s, ...}])", p.Name, s, name, prev, s, escapePointer(name))
					ok = false
					continue
				}
				d.sections[s][name] = partSection(part, s)[name]
				d.setBy[s+"/"+name] = part.By
			}
		}
	})
	t.eachPart(p, func(part model.PoolPart, field string) {
		if !ok || len(part.Patches) == 0 {
			return
		}
		if err := d.patch(part.Patches); err != nil {
			t.in.Fatalf(part.By, field+".patches", "pool %s: %v", p.Name, err)
			ok = false
		}
	})
	if !ok {
		return nil, false
	}
	t.eachPart(p, func(part model.PoolPart, field string) {
		for _, name := range sortedKeys(reservedLaunchTemplate) {
			if _, set := part.LaunchTemplate[name]; set {
				t.in.Fatalf(part.By, field+".launchTemplate."+name, "pool %s: launchTemplate %s is kubeplug's: %s", p.Name, name, reservedLaunchTemplate[name])
				ok = false
			}
		}
	})
	for _, name := range sortedKeys(reservedLaunchTemplate) {
		if _, set := d.sections[partLaunchTemplate][name]; set && ok {
			// Added by a patch (or the cloud plugin's values).
			t.in.Fatalf(d.setBy[partLaunchTemplate+"/"+name], "cloud.pools", "pool %s: launchTemplate %s is kubeplug's: %s", p.Name, name, reservedLaunchTemplate[name])
			ok = false
		}
	}
	for _, k := range sortedKeys(d.sections[partTags]) {
		if _, isString := d.sections[partTags][k].(string); !isString || strings.HasPrefix(k, "kubeplug.dev/") {
			t.in.Fatalf(d.setBy[partTags+"/"+k], "cloud.pools", "pool %s: tag %q: expected a string value and a key outside kubeplug.dev/, which kubeplug's own tags use", p.Name, k)
			ok = false
		}
	}
	return d, ok
}

// eachPart calls f with each cloud.pools[] part that selects p, in plugin
// order, and its field (cloud.pools[i], i counted within its plugin).
func (t *template) eachPart(p *model.Pool, f func(part model.PoolPart, field string)) {
	index := map[string]int{}
	for _, part := range t.in.Model.Cloud.Pools {
		i := index[part.By]
		index[part.By]++
		if part.Selects(p) {
			f(part, fmt.Sprintf("cloud.pools[%d]", i))
		}
	}
}

// checkParts refuses parts whose pool pattern is malformed, which would
// otherwise select nothing without a word.
func (t *template) checkParts() {
	index := map[string]int{}
	for _, part := range t.in.Model.Cloud.Pools {
		i := index[part.By]
		index[part.By]++
		if _, err := path.Match(part.Pool, ""); err != nil {
			t.in.Fatalf(part.By, fmt.Sprintf("cloud.pools[%d].pool", i), "expected a pool name or a pattern such as gpu-*, found %q: %v", part.Pool, err)
		}
		if part.Role != "" && part.Role != model.RoleWorker && part.Role != model.RoleControlPlane {
			t.in.Fatalf(part.By, fmt.Sprintf("cloud.pools[%d].role", i), "expected role %s or %s, found %q", model.RoleWorker, model.RoleControlPlane, part.Role)
		}
	}
}

// partSection is one section of a part.
func partSection(p model.PoolPart, section string) map[string]any {
	switch section {
	case partIAM:
		return p.IAM
	case partIngress:
		return p.SecurityGroupIngress
	case partLaunchTemplate:
		return p.LaunchTemplate
	case partTags:
		out := make(map[string]any, len(p.Tags))
		for k, v := range p.Tags {
			out[k] = v
		}
		return out
	}
	return nil
}

// patch applies RFC 6902 operations to the document; an error names the
// operation and its path.
func (d *poolDoc) patch(ops []model.PatchOp) error {
	doc, err := json.Marshal(d.sections)
	if err != nil {
		return err
	}
	for i, op := range ops {
		m := map[string]any{"op": op.Op, "path": op.Path}
		switch op.Op {
		case "add", "replace", "test":
			m["value"] = op.Value
		case "move", "copy":
			m["from"] = op.From
		}
		raw, err := json.Marshal([]any{m})
		if err != nil {
			return err
		}
		p, err := jsonpatch.DecodePatch(raw)
		if err != nil {
			return fmt.Errorf("patches[%d] %s %s: %w", i, op.Op, op.Path, err)
		}
		out, err := p.Apply(doc)
		if errors.Is(err, jsonpatch.ErrMissing) {
			return fmt.Errorf("patches[%d] %s %s: path does not exist in the pool's cloud document (sections %s)", i, op.Op, op.Path, strings.Join(poolSections, ", "))
		}
		if err != nil {
			return fmt.Errorf("patches[%d] %s %s: %w", i, op.Op, op.Path, err)
		}
		doc = out
	}
	var next map[string]map[string]any
	if err := json.Unmarshal(doc, &next); err != nil {
		return fmt.Errorf("the patched document: expected the sections %s, each an object: %w", strings.Join(poolSections, ", "), err)
	}
	for _, s := range poolSections {
		if next[s] == nil {
			next[s] = map[string]any{}
		}
	}
	for s := range next {
		if _, known := d.sections[s]; !known {
			return fmt.Errorf("the patch adds section %q; a pool's cloud document has %s", s, strings.Join(poolSections, ", "))
		}
	}
	d.sections = next
	return nil
}

// statements are the pool's IAM statements: its named ones in name order, each
// with its name as Sid when it has none and the name is a valid Sid, then the
// cloud.iam statements of its role or name, in plugin order.
func (t *template) statements(p *model.Pool, d *poolDoc) []any {
	out := []any{}
	for _, name := range sortedKeys(d.sections[partIAM]) {
		s := d.sections[partIAM][name]
		if m, isMap := s.(map[string]any); isMap {
			if _, has := m["Sid"]; !has && validSid(name) {
				m = maps.Clone(m)
				m["Sid"] = name
				s = m
			}
		}
		out = append(out, s)
	}
	for _, key := range []string{p.Role, p.Name} {
		for _, s := range t.in.Model.Cloud.IAM[key] {
			out = append(out, s.Statement)
		}
		if p.Role == p.Name {
			break
		}
	}
	return out
}

// validSid reports whether s may be an IAM statement's Sid: letters and digits.
func validSid(s string) bool {
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// escapePointer escapes a name for a JSON pointer.
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// poolRole adds the pool's IAM role, with the statements of its cloud
// document, and its instance profile. The role's trust policy is protected.
func (t *template) poolRole(id string, p *model.Pool, d *poolDoc) {
	t.put(id+"Role", map[string]any{
		"Type": "AWS::IAM::Role",
		"Properties": map[string]any{
			"AssumeRolePolicyDocument": map[string]any{
				"Version": "2012-10-17",
				"Statement": []any{map[string]any{
					"Effect":    "Allow",
					"Principal": map[string]any{"Service": []any{"ec2.amazonaws.com"}},
					"Action":    []any{"sts:AssumeRole"},
				}},
			},
			// One policy document per pool, always present even when it has no
			// statement, so that its place does not move.
			"Policies": []any{map[string]any{
				"PolicyName":     "kubeplug-" + p.Name,
				"PolicyDocument": map[string]any{"Version": "2012-10-17", "Statement": t.statements(p, d)},
			}},
		},
	})
	t.protected["/Resources/"+id+"Role/Properties/AssumeRolePolicyDocument"] = protectedTrust
	t.put(id+"InstanceProfile", map[string]any{
		"Type":       "AWS::IAM::InstanceProfile",
		"Properties": map[string]any{"Roles": []any{ref(id + "Role")}},
	})
}

// poolSecurityGroup adds a security group of the pool's own with the ingress
// rules of its cloud document (each described by its name unless it says
// otherwise), and returns its GroupId; nil when it has none.
func (t *template) poolSecurityGroup(id string, p *model.Pool, d *poolDoc) any {
	rules := d.sections[partIngress]
	if len(rules) == 0 {
		return nil
	}
	var list []any
	for _, name := range sortedKeys(rules) {
		r := rules[name]
		if m, isMap := r.(map[string]any); isMap {
			if _, has := m["Description"]; !has {
				m = maps.Clone(m)
				m["Description"] = name
				r = m
			}
		}
		list = append(list, r)
	}
	t.put(id+"PoolSecurityGroup", map[string]any{
		"Type": "AWS::EC2::SecurityGroup",
		"Properties": map[string]any{
			"GroupDescription":     "kubeplug " + t.in.ClusterName + " pool " + p.Name,
			"VpcId":                t.vpc,
			"SecurityGroupIngress": list,
			"Tags":                 t.tags("kubeplug.dev/pool", p.Name),
		},
	})
	return getAtt(id+"PoolSecurityGroup", "GroupId")
}

// groupTags are an Auto Scaling group's tags, all propagated to its machines:
// kubeplug's (the cluster and the pool), then the pool document's by key.
func groupTags(cluster, pool string, d *poolDoc) []any {
	out := []any{
		map[string]any{"Key": "kubeplug.dev/cluster", "Value": cluster, "PropagateAtLaunch": true},
		map[string]any{"Key": "kubeplug.dev/pool", "Value": pool, "PropagateAtLaunch": true},
	}
	for _, k := range sortedKeys(d.sections[partTags]) {
		out = append(out, map[string]any{"Key": k, "Value": d.sections[partTags][k], "PropagateAtLaunch": true})
	}
	return out
}
