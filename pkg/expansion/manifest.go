package expansion

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/suggest"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
)

// Files with a fixed meaning at the root of a package.
const (
	// ManifestFile is the expansion's manifest.
	ManifestFile = "expansion.yaml"
	// ChecksumsFile lists the SHA-256 of every other file.
	ChecksumsFile = "checksums.txt"
	// SignatureFile is the signature of ChecksumsFile.
	SignatureFile = ChecksumsFile + ".sig"
	// ImagesDir holds the package's images as an OCI image layout.
	ImagesDir = "images"
)

// MaxManifestSize bounds expansion.yaml.
const MaxManifestSize = 1 << 20

// Step is a step an expansion may skip, because the site provides it itself.
type Step struct {
	// Name is what skipSteps says.
	Name string
	// Means says what is skipped.
	Means string
}

// Steps are the steps skipSteps may name, besides "plugin/NAME" for a built-in
// plugin ([PluginStepPrefix]). The table is the one place that knows them.
var Steps = []Step{
	{"after-deploy", "the machines' afterDeploy hooks, run by the provider after the plugins are deployed"},
	{"validate", "every plugin's validate stage and checks"},
	{"image-push", "pushing the expansion's images to the cluster's registry: the site's registry already holds them"},
}

// ProviderPrefix prefixes a step or condition of the cluster's provider
// where an expansion names it: skipSteps [provider/node-routes], skipConditions
// and delegateConditions [provider/dns-ready]. Which exist is the provider's
// (pkg/provider's Steps), checked when a run knows the provider.
const ProviderPrefix = "provider/"

// PluginStepPrefix prefixes a skip step that names a built-in plugin the site
// replaces: the plugin is not deployed, whatever the cluster file enables.
const PluginStepPrefix = "plugin/"

// KnownSteps lists every name skipSteps accepts, sorted: the fixed steps and one
// plugin/NAME per built-in plugin.
func KnownSteps() []string {
	out := make([]string, 0, len(Steps)+8)
	for _, s := range Steps {
		out = append(out, s.Name)
	}
	for _, n := range builtinPlugins() {
		out = append(out, PluginStepPrefix+n)
	}
	slices.Sort(out)
	return out
}

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

func manifestSchema() (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		schema, schemaErr = yamldoc.CompileSchemaJSON(v1alpha1.ExpansionSchemaID, v1alpha1.ExpansionSchema())
	})
	return schema, schemaErr
}

// Decode parses and checks expansion.yaml's text on its own, without the rest of
// the package: syntax, schema, versions, names, durations, paths and skip steps.
// file names the manifest in diagnostics. It never panics, whatever data holds.
// The manifest is nil when any diagnostic is fatal.
func Decode(file string, data []byte) (*v1alpha1.Expansion, *yamldoc.Doc, diag.List) {
	var l diag.List
	if len(data) > MaxManifestSize {
		l.Errorf(file, 0, 0, "", "file is %d bytes, larger than the %d-byte limit for %s", len(data), MaxManifestSize, ManifestFile)
		return nil, nil, l
	}
	doc, pl := yamldoc.Parse(file, data)
	l = append(l, pl...)
	if doc == nil {
		return nil, nil, l
	}
	sch, err := manifestSchema()
	if err != nil {
		l.Errorf(file, 0, 0, "", "cannot compile the schema: %v", err)
		return nil, doc, l
	}
	if vl := doc.Validate(sch); len(vl) > 0 {
		return nil, doc, append(l, vl...)
	}
	m := &v1alpha1.Expansion{}
	if !doc.Decode(m, &l) {
		return nil, doc, l
	}
	check(doc, m, &l)
	l.Sort()
	if l.HasFatal() {
		return nil, doc, l
	}
	return m, doc, l
}

// check is every rule of expansion.yaml that its schema cannot say.
//
// Branches: one check per rule of expansion.yaml that its schema cannot say
// (versions, plugin sources and digests, charts, images, node files and hooks),
// each naming its field; together they read as the format's rules.
func check(doc *yamldoc.Doc, m *v1alpha1.Expansion, l *diag.List) {
	if _, err := semver.StrictNewVersion(m.Metadata.Version); err != nil {
		doc.Errorf(l, "/metadata/version", "expected a semantic version such as 1.0.0, found %q", m.Metadata.Version)
	}
	s := m.Spec
	for i, p := range s.Plugins {
		ptr := "/spec/plugins/" + strconv.Itoa(i)
		switch {
		case (p.Path == "") == (p.Ref == ""):
			doc.Errorf(l, ptr, "expected exactly one of path (an archive inside the expansion) and ref (oci://...), found %s", both(p.Path != "", p.Ref != ""))
		case p.Path != "":
			checkPath(doc, l, ptr+"/path", p.Path)
			if p.Digest != "" {
				doc.Errorf(l, ptr+"/digest", "digest pins a ref; a path inside the expansion is pinned by %s", ChecksumsFile)
			}
		default:
			if !strings.HasPrefix(p.Ref, "oci://") {
				doc.Errorf(l, ptr+"/ref", "expected an OCI reference oci://HOST/REPO/NAME:VERSION, found %q", p.Ref)
			}
			if p.Digest == "" {
				doc.Errorf(l, ptr+"/ref", "a ref must be pinned by digest (sha256:...): an air-gapped site cannot check what a tag named when the package was made")
			}
		}
	}
	charts := map[string]int{}
	for i, c := range s.Charts {
		ptr := "/spec/charts/" + strconv.Itoa(i)
		if j, dup := charts[c.Name]; dup {
			doc.Errorf(l, ptr+"/name", "chart %s is already named at spec.charts[%d]", c.Name, j)
		}
		charts[c.Name] = i
		checkPath(doc, l, ptr+"/path", c.Path)
	}
	for i, img := range s.Images {
		if err := CheckImageRef(img); err != nil {
			doc.Errorf(l, "/spec/images/"+strconv.Itoa(i), "%v", err)
		}
	}
	for i, n := range s.Nodes {
		ptr := "/spec/nodes/" + strconv.Itoa(i)
		for j, f := range n.Files {
			fp := ptr + "/files/" + strconv.Itoa(j)
			if !path.IsAbs(f.Path) {
				doc.Errorf(l, fp+"/path", "expected an absolute path on the machine, found %q", f.Path)
			}
			if (f.Content == "") == (f.Source == "") {
				doc.Errorf(l, fp, "expected exactly one of content and source, found %s", both(f.Content != "", f.Source != ""))
			}
			if f.Source != "" {
				checkPath(doc, l, fp+"/source", f.Source)
			}
		}
		for j, h := range n.Hooks {
			hp := ptr + "/hooks/" + strconv.Itoa(j)
			if n := runSources(h.Run); n != 1 {
				doc.Errorf(l, hp+"/run", "expected exactly one of command, script and url, found %d", n)
			}
			if h.Run.Script != "" {
				checkPath(doc, l, hp+"/run/script", h.Run.Script)
			}
			if h.Timeout != "" {
				checkDuration(doc, l, hp+"/timeout", h.Timeout)
			}
		}
	}
	hooks := map[string]int{}
	for i, h := range s.Hooks {
		ptr := "/spec/hooks/" + strconv.Itoa(i)
		if j, dup := hooks[h.Name]; dup {
			doc.Errorf(l, ptr+"/name", "hook %s is already named at spec.hooks[%d]", h.Name, j)
		}
		hooks[h.Name] = i
		if (len(h.Command) == 0) == (h.Script == "") {
			doc.Errorf(l, ptr, "expected exactly one of command and script, found %s", both(len(h.Command) > 0, h.Script != ""))
		}
		if h.Script != "" {
			checkPath(doc, l, ptr+"/script", h.Script)
		}
		if h.Timeout != "" {
			checkDuration(doc, l, ptr+"/timeout", h.Timeout)
		}
	}
	if o := s.Overrides; o != nil {
		for _, name := range sortedKeys(o.Plugins) {
			if !plugin.NameRE.MatchString(name) || len(name) > 63 {
				doc.Errorf(l, yamldoc.Pointer("spec", "overrides", "plugins", name), "expected a plugin name (a DNS label), found %q", name)
			}
		}
	}
	known := KnownSteps()
	for i, st := range s.SkipSteps {
		if name, ok := strings.CutPrefix(st, ProviderPrefix); ok {
			// The provider's steps are checked against its table once the
			// run knows the provider (CheckProviderNames).
			if !plugin.NameRE.MatchString(name) {
				doc.Errorf(l, "/spec/skipSteps/"+strconv.Itoa(i), "expected %sSTEP with STEP a step of the cluster's provider (a DNS label), found %q", ProviderPrefix, st)
			}
			continue
		}
		if !slices.Contains(known, st) {
			doc.Errorf(l, "/spec/skipSteps/"+strconv.Itoa(i), "unknown step %q: expected one of %s, or %sSTEP for a step of the cluster's provider%s", st, strings.Join(known, ", "), ProviderPrefix, suggest.Hint(suggest.Closest(st, known)))
		}
	}
	skipped := map[string]int{}
	for i, c := range s.SkipConditions {
		ptr := "/spec/skipConditions/" + strconv.Itoa(i)
		if err := checkCheckName(c); err != nil {
			doc.Errorf(l, ptr, "%v", err)
		}
		skipped[c] = i
	}
	delegated := map[string]int{}
	for i, d := range s.DelegateConditions {
		ptr := "/spec/delegateConditions/" + strconv.Itoa(i)
		if j, dup := delegated[d.Check]; dup {
			doc.Errorf(l, ptr+"/check", "check %s is already delegated at spec.delegateConditions[%d]", d.Check, j)
		}
		delegated[d.Check] = i
		if j, ok := skipped[d.Check]; ok {
			doc.Errorf(l, ptr+"/check", "check %s is both skipped (spec.skipConditions[%d]) and delegated: choose one", d.Check, j)
		}
		if d.Timeout != "" {
			checkDuration(doc, l, ptr+"/timeout", d.Timeout)
		}
	}
}

func both(a, b bool) string {
	if a && b {
		return "both"
	}
	return "neither"
}

func runSources(r v1alpha1.HookRun) int {
	n := 0
	for _, set := range []bool{len(r.Command) > 0, r.Script != "", r.URL != ""} {
		if set {
			n++
		}
	}
	return n
}

// checkPath checks a path inside the package: relative, clean, not climbing out,
// and not one of the files with a fixed meaning.
func checkPath(doc *yamldoc.Doc, l *diag.List, ptr, p string) {
	if err := CleanPath(p); err != nil {
		doc.Errorf(l, ptr, "%v", err)
		return
	}
	switch p {
	case ManifestFile, ChecksumsFile, SignatureFile:
		doc.Errorf(l, ptr, "%s is the package's own %s, not an artifact", p, map[string]string{ManifestFile: "manifest", ChecksumsFile: "checksum list", SignatureFile: "signature"}[p])
	}
}

// CleanPath checks that p names a file inside a package: relative, in clean
// form, with forward slashes, never climbing out.
func CleanPath(p string) error {
	switch {
	case p == "" || p == ".":
		return fmt.Errorf("expected a path inside the expansion, found %q", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("expected a path relative to the expansion's root, found the absolute path %q", p)
	case strings.Contains(p, "\\"):
		return fmt.Errorf("expected forward slashes in path %q", p)
	case p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/.."):
		return fmt.Errorf("path %q climbs out of the expansion", p)
	case path.Clean(p) != p:
		return fmt.Errorf("path %q is not clean (expected %q)", p, path.Clean(p))
	}
	return nil
}

func checkDuration(doc *yamldoc.Doc, l *diag.List, ptr, d string) {
	if v, err := time.ParseDuration(d); err != nil || v <= 0 {
		doc.Errorf(l, ptr, "expected a positive Go duration such as 5m, found %q", d)
	}
}

// checkCheckName checks "PLUGIN/CHECK".
func checkCheckName(s string) error {
	p, c, ok := strings.Cut(s, "/")
	if !ok || c == "" || !plugin.NameRE.MatchString(p) {
		return fmt.Errorf("expected a plugin check as PLUGIN/CHECK, or %sCONDITION for a readiness condition of the cluster's provider, found %q", ProviderPrefix, s)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
