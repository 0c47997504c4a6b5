package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// CloudTemplate builds the cloud template (cloud/template.json) of a cluster: the
// provider's core resources with the plugins' cloud resources and outputs. The aws
// provider's is the one kubeplug has (a CloudFormation template, rendered for
// every cluster so it can be reviewed, and deployed by kubeplug up on aws); it
// registers itself with pkg/provider, and the action layer hands it to Render in
// Input.Cloud. Render then applies the plugins' cloud patches, refusing one that
// changes a path Template says is protected.
type CloudTemplate interface {
	// Template returns the template's JSON document and the JSON pointers no
	// plugin patch may change, each with why. It reports problems through
	// in.Fatalf and returns a nil document when it cannot build one.
	Template(in CloudInput) (doc []byte, protected map[string]string)
}

// CloudInput is what a CloudTemplate builds from.
type CloudInput struct {
	ClusterName string
	// Model is the rendered model: its pools (each a launch template and group
	// on aws) and its Cloud contributions.
	Model *model.Model
	// Provider is the cluster's spec.provider (nil when it names none): a
	// template reads its own field, as a provider's factory does.
	Provider *v1alpha1.Provider
	// Values are the built-in cloud plugin's values when the cluster enables
	// it (Input.CloudValues); nil means that plugin's defaults.
	Values map[string]any
	// Fatalf reports a fatal problem, naming the plugin (empty for the cluster
	// file) and the field.
	Fatalf func(plugin, field, format string, args ...any)
}

// cloud renders cloud/template.json through Input.Cloud, then applies the
// plugins' patches in plugin order: a patch that changes a protected path (a
// pool's UserData, a role's AssumeRolePolicyDocument) is fatal, naming the plugin
// and the path. Without Input.Cloud there is no template; plugins that contribute
// to it are then refused, naming each, rather than dropped.
func (r *renderer) cloud(context.Context) {
	m := r.in.Model
	if r.in.Cloud == nil {
		for _, by := range cloudContributors(m.Cloud) {
			r.fatalf(by, "cloud", "the plugin contributes to the cloud template, but no cloud template is registered: a program that renders one links pkg/provider/aws (cmd/kubeplug does, through pkg/provider/all)")
		}
		return
	}
	doc, protected := r.in.Cloud.Template(CloudInput{ClusterName: r.in.ClusterName, Model: m, Provider: r.in.Provider, Values: r.in.CloudValues, Fatalf: r.fatalf})
	if doc == nil {
		return
	}
	for i, p := range m.Cloud.Patches {
		if out, ok := r.cloudPatch(doc, p, fmt.Sprintf("cloud.patches[%d]", i), protected); ok {
			doc = out
		}
	}
	b, err := normalizeJSON(doc)
	if err != nil {
		r.fatalf("", "cloud", "encoding the cloud template: %v", err)
		return
	}
	r.out["cloud/template.json"] = b
}

// cloudContributors are the plugins that contribute to the cloud template, sorted.
func cloudContributors(c model.Cloud) []string {
	by := map[string]bool{}
	for _, s := range c.Resources {
		by[s.By] = true
	}
	for _, s := range c.Outputs {
		by[s.By] = true
	}
	for _, ss := range c.IAM {
		for _, s := range ss {
			by[s.By] = true
		}
	}
	for _, p := range c.Patches {
		by[p.By] = true
	}
	for _, p := range c.Pools {
		by[p.By] = true
	}
	return sortedKeys(by)
}

// cloudPatch applies one plugin's patch operation by operation; ok is false, with a
// fatal diagnostic naming the plugin, the operation and the path, when an operation
// fails or changes a protected path (also through a parent, a move or a copy), and
// then none of the patch applies.
func (r *renderer) cloudPatch(doc []byte, p model.Patch, field string, protected map[string]string) ([]byte, bool) {
	for j, op := range p.Ops {
		out, err := applyOps(doc, []model.PatchOp{op})
		if err != nil {
			var oe *opError
			target := "the cloud template"
			if errors.As(err, &oe) {
				oe.Index = j
				if oe.Missing {
					// The usual cause: a logical name generated from a pool's name
					// (WorkersRole) in a cluster whose pools are named otherwise.
					target += " (a pool's resources are named after the pool; to change every pool of a role or name, set or patch its parts by name with cloud.pools[], see docs/plugin-format.md)"
				}
			}
			r.patchFailed(p.By, field, target, err)
			return nil, false
		}
		if path, why := changedProtected(doc, out, protected); path != "" {
			r.fatalf(p.By, fmt.Sprintf("%s.ops[%d]", field, j), "patch %s %s would change %s, which no plugin may change: %s", op.Op, op.Path, path, why)
			return nil, false
		}
		doc = out
	}
	return doc, true
}

// changedProtected returns the first protected path (in sorted order) whose value
// differs between two versions of the template, and why it is protected.
func changedProtected(before, after []byte, protected map[string]string) (string, string) {
	var b, a any
	if json.Unmarshal(before, &b) != nil || json.Unmarshal(after, &a) != nil {
		return "", ""
	}
	for _, ptr := range sortedKeys(protected) {
		bv, bok := lookup(b, ptr)
		av, aok := lookup(a, ptr)
		if bok != aok || !reflect.DeepEqual(bv, av) {
			return ptr, protected[ptr]
		}
	}
	return "", ""
}

// lookup evaluates an RFC 6901 JSON pointer over decoded JSON objects.
func lookup(doc any, ptr string) (any, bool) {
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil, false
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if doc, ok = obj[tok]; !ok {
			return nil, false
		}
	}
	return doc, true
}

// patchFailed reports a failed patch operation, naming the plugin and the path.
func (r *renderer) patchFailed(by, field, target string, err error) {
	var oe *opError
	if !errors.As(err, &oe) {
		r.fatalf(by, field, "patching %s: %v", target, err)
		return
	}
	field = fmt.Sprintf("%s.ops[%d]", field, oe.Index)
	if oe.Missing {
		p := oe.Op.Path
		if oe.Op.Op == "move" || oe.Op.Op == "copy" {
			p = oe.Op.From + " or " + oe.Op.Path
		}
		r.fatalf(by, field, "patch %s %s: path %s does not exist in %s", oe.Op.Op, oe.Op.Path, p, target)
		return
	}
	r.fatalf(by, field, "patch %s %s failed on %s: %v", oe.Op.Op, oe.Op.Path, target, oe.Err)
}

// CloudName turns a pool or stack name into a CloudFormation logical-name
// prefix: "gpu-nodes" and "gpu_nodes" become "GpuNodes"; logical names allow only
// letters and digits.
func CloudName(s string) string {
	var b strings.Builder
	up := true
	for _, c := range s {
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			up = true
			continue
		}
		if up {
			c = unicode.ToUpper(c)
			up = false
		}
		b.WriteRune(c)
	}
	return b.String()
}
