package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/postrenderer"
	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/model"
)

// Release is one Helm release of a plugin with its chart loaded, for a deployer that
// installs it through the Helm SDK as a real release rather than as loose objects.
type Release struct {
	model.HelmRelease
	// Chart is the chart loaded from the plugin's package.
	Chart *chartv2.Chart
	// Values are a copy of the release's values, safe to hand to Helm.
	Values map[string]any
	// PostRenderer applies the model's object patches to what Helm renders; nil when no
	// patch touches the release's objects.
	PostRenderer postrenderer.PostRenderer
}

// Content is Objects for a deployer that installs Helm releases through the Helm SDK:
// it returns each plugin's manifests (object patches applied) and, separately, each
// plugin's Helm releases. Charts are still rendered, so that a patch target matching
// only a chart's objects is not reported as matching nothing and every diagnostic is
// what `kubeplug render` reports.
func Content(ctx context.Context, in Input) (objects map[string][]map[string]any, releases map[string][]Release, l diag.List) {
	r := &renderer{in: in, out: map[string][]byte{}}
	if !r.check() {
		return nil, nil, r.diags
	}
	order, byPlugin := r.objects(ctx)
	if err := ctx.Err(); err != nil {
		r.fatalf("", "", "render cancelled: %v", err)
	}
	if r.diags.HasFatal() {
		return nil, nil, r.diags
	}
	objects = r.decode(order, byPlugin, func(o *kubeObject) bool { return o.release < 0 })
	patched := map[int]bool{}
	for _, p := range order {
		for _, o := range byPlugin[p] {
			if o.release >= 0 && o.patched {
				patched[o.release] = true
			}
		}
	}
	releases = map[string][]Release{}
	for i, h := range in.Model.Kubernetes.HelmReleases {
		chrt, err := r.loadChart(h)
		if err != nil {
			r.fatalf(h.By, "kubernetes.helmReleases."+h.Namespace+"/"+h.Name, "loading chart %s: %v", h.Chart, err)
			continue
		}
		values, err := copyValues(h.Values)
		if err != nil {
			r.fatalf(h.By, "kubernetes.helmReleases."+h.Namespace+"/"+h.Name, "copying values: %v", err)
			continue
		}
		rel := Release{HelmRelease: h, Chart: chrt, Values: values}
		if patched[i] {
			rel.PostRenderer = &patcher{patches: in.Model.Kubernetes.Patches, namespace: h.Namespace}
		}
		releases[h.By] = append(releases[h.By], rel)
	}
	if r.diags.HasFatal() {
		return nil, nil, r.diags
	}
	return objects, releases, r.diags
}

// patcher applies object patches to the manifests Helm renders on the cluster, so a
// plugin's patch to a chart's object holds whether the chart is rendered to files or
// installed as a release.
type patcher struct {
	patches   []model.ObjectPatch
	namespace string
}

// A patcher is a post-renderer that says what it does (deploy/helm's
// PostRenderDigester).
var _ interface {
	postrenderer.PostRenderer
	Digest() string
} = (*patcher)(nil)

// Digest identifies what Run does: the patches and the release's namespace.
// Release installs compare it with the installed revision's, so that a
// patch that changes, or goes (an expansion's site-registry rewrite of a
// chart's images, when the expansion is removed), upgrades the release.
func (p *patcher) Digest() string {
	b, _ := json.Marshal(struct {
		Patches   []model.ObjectPatch
		Namespace string
	}{p.patches, p.namespace}) // plain data: cannot fail
	return string(b)
}

func (p *patcher) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	var out bytes.Buffer
	for doc := range strings.SplitSeq(in.String(), "\n---") {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("parse a rendered document: %w", err)
		}
		if j = bytes.TrimSpace(j); len(j) == 0 || j[0] != '{' {
			continue
		}
		o := newKubeObject("", j, "")
		for _, pt := range p.patches {
			t := o.target
			if t.Namespace == "" {
				t.Namespace = p.namespace // Helm puts it in the release namespace
			}
			if !matches(pt.Target, t) {
				continue
			}
			doc, err := applyOps(o.doc, pt.Ops)
			if err != nil {
				return nil, fmt.Errorf("patch %s: %w", refText(o.target), err)
			}
			o.doc = doc
			o.target = o.ref()
		}
		y, err := yaml.JSONToYAML(o.doc)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", refText(o.target), err)
		}
		out.WriteString("---\n")
		out.Write(y)
	}
	return &out, nil
}
