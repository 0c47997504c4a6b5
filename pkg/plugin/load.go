package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/expr"
)

var (
	manifestSchemaOnce sync.Once
	manifestSchema     *jsonschema.Schema
	manifestSchemaErr  error
)

// ManifestSchema returns the compiled schema of plugin.yaml.
func ManifestSchema() (*jsonschema.Schema, error) {
	manifestSchemaOnce.Do(func() {
		manifestSchema, manifestSchemaErr = yamldoc.CompileSchemaJSON(v1alpha1.PluginSchemaID, v1alpha1.PluginSchema())
	})
	return manifestSchema, manifestSchemaErr
}

// NameRE is what plugin, hook and pool names must match: a DNS label.
var NameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// DecodeManifest parses and checks plugin.yaml's text on its own, without the rest of
// the package: syntax, schema, versions, constraints, names and durations. file names
// the manifest in diagnostics. It never panics, whatever data holds.
func DecodeManifest(file string, data []byte) (*v1alpha1.Plugin, *yamldoc.Doc, diag.List) {
	var l diag.List
	if len(data) > MaxManifestSize {
		l.Errorf(file, 0, 0, "", "file is %s, larger than the %s limit for %s", size(int64(len(data))), size(MaxManifestSize), ManifestFile)
		return nil, nil, l
	}
	doc, pl := yamldoc.Parse(file, data)
	l = append(l, pl...)
	if doc == nil {
		return nil, nil, l
	}
	sch, err := ManifestSchema()
	if err != nil {
		l.Errorf(file, 0, 0, "", "cannot compile the schema: %v", err)
		return nil, doc, l
	}
	if vl := doc.Validate(sch); len(vl) > 0 {
		return nil, doc, append(l, versionHint(doc, vl)...)
	}
	m := &v1alpha1.Plugin{}
	if !doc.Decode(m, &l) {
		return nil, doc, l
	}
	checkManifest(doc, m, &l)
	return m, doc, l
}

// Manifest is a package's plugin.yaml, read and checked on its own by ReadManifest.
type Manifest struct {
	// Plugin is plugin.yaml, decoded. Do not modify it.
	Plugin *v1alpha1.Plugin

	location string
	data     []byte
	doc      *yamldoc.Doc
	l        diag.List
}

// ReadManifest reads and checks a package's plugin.yaml on its own, without the rest
// of the package: what a source reads to list the package. location names the
// package in diagnostics, as for Load, and the diagnostics are those Load gives for
// the manifest. A plugin.yaml that is a symlink leading out of the package is refused
// unread. The manifest is nil when any diagnostic is fatal.
func ReadManifest(fsys fs.FS, location string) (*Manifest, diag.List) {
	file := path.Join(location, ManifestFile)
	var l diag.List
	if fi, err := fs.Lstat(fsys, ManifestFile); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, err := fs.ReadLink(fsys, ManifestFile)
		if err != nil {
			l.Errorf(file, 0, 0, "", "cannot read symlink: %v", unwrapPath(err))
			return nil, l
		}
		if msg := linkEscape(fsys, ManifestFile, target); msg != "" {
			l.Errorf(file, 0, 0, "", "%s", msg)
			return nil, l
		}
	}
	data, err := readLimited(fsys, ManifestFile, MaxManifestSize)
	if err != nil {
		l.Errorf(file, 0, 0, "", "%v", err)
		return nil, l
	}
	m, doc, ml := DecodeManifest(file, data)
	l = append(l, ml...)
	if l.HasFatal() {
		return nil, l
	}
	return &Manifest{Plugin: m, location: location, data: data, doc: doc, l: ml}, l
}

// Load loads the package of the manifest m, rooted at fsys, as [Load] does with m's
// location. plugin.yaml is decoded again only when it no longer holds the bytes m was
// read from: a source lists a package and loads it later without decoding its
// manifest twice.
func (m *Manifest) Load(fsys fs.FS, origin Origin) (*Package, diag.List) {
	return load(fsys, origin, m.location, m)
}

// Load reads the package rooted at fsys and checks it whole. location names the
// package in diagnostics and in Package.Location. The package is nil when any
// diagnostic is fatal.
func Load(fsys fs.FS, origin Origin, location string) (*Package, diag.List) {
	return load(fsys, origin, location, nil)
}

// load is Load, reusing the decoding of read when plugin.yaml still holds its bytes.
func load(fsys fs.FS, origin Origin, location string, read *Manifest) (*Package, diag.List) {
	file := path.Join(location, ManifestFile)
	var l diag.List
	// Walk first: a plugin.yaml that is a symlink out of the package must not be
	// read (and its text must not end up in diagnostics).
	files, digest, wl := walk(fsys, location)
	if files[ManifestFile].escapes {
		return nil, wl
	}
	data, err := readLimited(fsys, ManifestFile, MaxManifestSize)
	if err != nil {
		l.Errorf(file, 0, 0, "", "%v", err)
		return nil, l
	}
	var (
		m   *v1alpha1.Plugin
		doc *yamldoc.Doc
		ml  diag.List
	)
	if read != nil && bytes.Equal(read.data, data) {
		m, doc, ml = read.Plugin, read.doc, read.l
	} else {
		m, doc, ml = DecodeManifest(file, data)
	}
	l = append(l, ml...)
	l = append(l, wl...)
	if m == nil {
		return nil, l
	}
	p := &Package{Manifest: m, Name: m.Metadata.Name, Origin: origin, Location: location, Digest: digest, FS: fsys, doc: doc}
	p.Version, _ = semver.StrictNewVersion(m.Metadata.Version)
	if m.Spec.KubernetesVersion != "" {
		p.KubernetesVersion, _ = semver.NewConstraint(m.Spec.KubernetesVersion)
	}
	checkRefs(doc, m, files, &l)
	checkHealth(doc, m, &l)
	if m.Spec.Values != nil {
		p.Schema = loadValuesSchema(fsys, location, m, files, &l)
		if p.Schema != nil && len(m.Spec.Values.Defaults) > 0 {
			for _, v := range yamldoc.Check(p.Schema, map[string]any(m.Spec.Values.Defaults)) {
				if strings.HasSuffix(v.Rule, "/required") {
					// Defaults are one layer: a required value may come from the
					// cluster file, and is checked once the layers are merged.
					continue
				}
				ptr := "/spec/values/defaults" + v.Pointer
				doc.Errorf(&l, ptr, "default value does not match the values schema: %s (schema rule %s)", v.Message, v.Rule)
			}
		}
	}
	l.Sort()
	if l.HasFatal() {
		return nil, l
	}
	return p, l
}

// versionHint adds to the schema's complaint about metadata.version (a number
// such as 0.3, or v1.17.2) the version it most likely means, written as one.
func versionHint(doc *yamldoc.Doc, vl diag.List) diag.List {
	root, _ := doc.Value.(map[string]any)
	md, _ := root["metadata"].(map[string]any)
	if md["version"] == nil {
		return vl
	}
	v, err := semver.NewVersion(fmt.Sprint(md["version"]))
	if err != nil {
		return vl
	}
	field := yamldoc.FieldPath(doc, "/metadata/version")
	line, col := doc.Pos("/metadata/version")
	for i, d := range vl {
		if d.Field == field && d.Line == line && d.Column == col {
			vl[i].Message += fmt.Sprintf("; write it as \"%s\"", v.String())
		}
	}
	return vl
}

// Branches: one check per rule of plugin.yaml that its schema cannot say
// (versions, requires, names, sensitive pointers, nodes, runtime, validate
// checks), each naming its field; together they read as the format's rules.
func checkManifest(doc *yamldoc.Doc, m *v1alpha1.Plugin, l *diag.List) {
	if _, err := semver.StrictNewVersion(m.Metadata.Version); err != nil {
		doc.Errorf(l, "/metadata/version", "expected a semantic version such as 1.4.0, found %q", m.Metadata.Version)
	}
	s := m.Spec
	if s.KubernetesVersion != "" {
		checkConstraint(doc, l, "/spec/kubernetesVersion", s.KubernetesVersion)
	}
	seen := map[string]int{}
	for i, r := range s.Requires {
		ptr := "/spec/requires/" + strconv.Itoa(i)
		if r.Name == m.Metadata.Name {
			doc.Errorf(l, ptr+"/name", "a plugin cannot require itself")
		}
		if j, dup := seen[r.Name]; dup {
			doc.Errorf(l, ptr+"/name", "%s is already required at spec.requires[%d]", r.Name, j)
		}
		seen[r.Name] = i
		if r.Version != "" {
			checkConstraint(doc, l, ptr+"/version", r.Version)
		}
	}
	for _, list := range []struct {
		field string
		names []string
	}{{"after", s.After}, {"before", s.Before}, {"conflicts", s.Conflicts}} {
		for i, n := range list.names {
			ptr := "/spec/" + list.field + "/" + strconv.Itoa(i)
			if !NameRE.MatchString(n) || len(n) > 63 {
				doc.Errorf(l, ptr, "expected a plugin name (a DNS label: at most 63 lower-case letters, digits and '-'), found %q", n)
			} else if n == m.Metadata.Name {
				doc.Errorf(l, ptr, "a plugin cannot name itself here")
			}
		}
	}
	if v := s.Values; v != nil {
		for i, p := range v.Sensitive {
			if !strings.HasPrefix(p, "/") {
				doc.Errorf(l, "/spec/values/sensitive/"+strconv.Itoa(i), "expected a JSON pointer such as /clientSecret, found %q", p)
			}
		}
	}
	if c := s.Contributes; c != nil {
		for i, n := range c.Nodes {
			checkNode(doc, l, "/spec/contributes/nodes/"+strconv.Itoa(i), n)
		}
		checkKeyPairs(doc, l, c.KeyPairs)
	}
	if r := s.Runtime; r != nil && r.Timeout != "" {
		checkDuration(doc, l, "/spec/runtime/timeout", r.Timeout)
	}
	for i, c := range s.Validate {
		ptr := "/spec/validate/" + strconv.Itoa(i)
		n := 0
		if c.Wait != nil {
			n++
			if c.Wait.Name == "" {
				doc.Errorf(l, ptr+"/wait", "expected the name of the %s to wait for", c.Wait.Kind)
			}
			if c.Wait.Timeout != "" {
				checkDuration(doc, l, ptr+"/wait/timeout", c.Wait.Timeout)
			}
		}
		if c.Expression != nil {
			n++
			if c.Expression.Timeout != "" {
				checkDuration(doc, l, ptr+"/expression/timeout", c.Expression.Timeout)
			}
			// As the check runner does: over object when the check names one, else
			// over objects.
			named, env := c.Expression.Name != "", expr.Objects
			if named {
				env = expr.Object
			}
			if _, err := env.Compile(c.Expression.Expression); err != nil {
				over := "objects (the list of every " + c.Expression.Kind + "; name one to use object)"
				if named {
					over = "object (the " + c.Expression.Kind + " named " + c.Expression.Name + ")"
				}
				doc.Errorf(l, ptr+"/expression/expression", "expected a CEL expression over %s that yields a bool: %v", over, err)
			}
		}
		if c.Exec != nil {
			n++
			if c.Exec.Timeout != "" {
				checkDuration(doc, l, ptr+"/exec/timeout", c.Exec.Timeout)
			}
		}
		if n != 1 {
			doc.Errorf(l, ptr, "expected exactly one of wait, expression and exec")
		}
	}
	if d := s.Drift; d != nil {
		for i, ig := range d.Ignore {
			for j, p := range ig.Paths {
				if !strings.HasPrefix(p, "/") {
					doc.Errorf(l, "/spec/drift/ignore/"+strconv.Itoa(i)+"/paths/"+strconv.Itoa(j), "expected a JSON pointer such as /spec/replicas, found %q", p)
				}
			}
		}
	}
}

func checkNode(doc *yamldoc.Doc, l *diag.List, ptr string, n v1alpha1.NodeContribution) {
	for i, r := range n.Roles {
		if r != "worker" && r != "control-plane" {
			doc.Errorf(l, ptr+"/roles/"+strconv.Itoa(i), "expected one of \"worker\", \"control-plane\", found %q", r)
		}
	}
	for i, f := range n.Files {
		fp := ptr + "/files/" + strconv.Itoa(i)
		if !path.IsAbs(f.Path) {
			doc.Errorf(l, fp+"/path", "expected an absolute path on the machine, found %q", f.Path)
		}
		checkNodeFileSource(doc, l, fp, f)
	}
	for i, u := range n.SystemdUnits {
		if u.Mask && (u.Content != "" || u.Enable || len(u.DropIns) > 0) {
			doc.Errorf(l, ptr+"/systemdUnits/"+strconv.Itoa(i)+"/mask", "unit %s: a masked unit cannot have content, enable or drop-ins: masking keeps a unit the machine has from starting", u.Name)
		}
	}
	hooks := map[string]bool{}
	for i, h := range n.Hooks {
		hp := ptr + "/hooks/" + strconv.Itoa(i)
		if hooks[h.Name] {
			doc.Errorf(l, hp+"/name", "duplicate hook name %q", h.Name)
		}
		hooks[h.Name] = true
		if runSources(h.Run) != 1 {
			doc.Errorf(l, hp+"/run", "expected exactly one of command, script and url")
		}
		if h.Timeout != "" {
			checkDuration(doc, l, hp+"/timeout", h.Timeout)
		}
	}
	checkHooks(doc, l, ptr, n.Hooks)
}

// checkKeyPairs checks what can be checked of key pairs before rendering:
// unique names, known roles, a validity that is a duration.
func checkKeyPairs(doc *yamldoc.Doc, l *diag.List, kps []v1alpha1.KeyPair) {
	seen := map[string]int{}
	for i, k := range kps {
		ptr := "/spec/contributes/keyPairs/" + strconv.Itoa(i)
		if j, dup := seen[k.Name]; dup {
			doc.Errorf(l, ptr+"/name", "key pair %s is already declared at spec.contributes.keyPairs[%d]", k.Name, j)
		}
		seen[k.Name] = i
		for j, r := range k.Roles {
			if r != "worker" && r != "control-plane" {
				doc.Errorf(l, ptr+"/roles/"+strconv.Itoa(j), "expected one of \"worker\", \"control-plane\", found %q", r)
			}
		}
		if k.Validity != "" && !strings.Contains(k.Validity, "{{") {
			if v, err := time.ParseDuration(k.Validity); err != nil || v < time.Hour {
				doc.Errorf(l, ptr+"/validity", "key pair %s: expected a duration of an hour or more such as 8760h, found %q", k.Name, k.Validity)
			}
		}
	}
}

// checkNodeFileSource checks that a node file says where its bytes come from
// once, and that a download is pinned by its digest.
func checkNodeFileSource(doc *yamldoc.Doc, l *diag.List, fp string, f v1alpha1.NodeFile) {
	n := 0
	for _, set := range []bool{doc.Has(fp + "/content"), f.Source != "", f.URL != ""} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		doc.Errorf(l, fp, "expected exactly one of content, source and url")
	case f.URL != "" && f.SHA256 == "":
		doc.Errorf(l, fp+"/url", "file %s: a url needs sha256, the hex SHA-256 of what it serves (sha256sum FILE), so that what reaches the machines is what was reviewed", f.Path)
	case f.URL != "" && !strings.Contains(f.URL, "{{") && !strings.HasPrefix(f.URL, "https://") && !strings.HasPrefix(f.URL, "http://"):
		doc.Errorf(l, fp+"/url", "file %s: expected an https:// or http:// URL, found %q", f.Path, f.URL)
	case f.URL == "" && f.SHA256 != "":
		doc.Errorf(l, fp+"/sha256", "file %s: sha256 pins a url; this file has none", f.Path)
	}
}

func checkConstraint(doc *yamldoc.Doc, l *diag.List, ptr, c string) {
	if _, err := semver.NewConstraint(c); err != nil {
		doc.Errorf(l, ptr, "expected a version constraint such as \">=1.2\" or \"^2\", found %q", c)
	}
}

func checkDuration(doc *yamldoc.Doc, l *diag.List, ptr, d string) {
	if v, err := time.ParseDuration(d); err != nil || v <= 0 {
		doc.Errorf(l, ptr, "expected a positive duration such as 30s or 2m, found %q", d)
	}
}

// checkRefs checks every file the manifest refers to: a clean relative path inside
// the package that exists and has the right type.
//
// Branches: one check per kind of file the manifest refers to (values schema,
// node files and units, hooks, runtime, charts), each by the same rule: a clean
// relative path inside the package, of the right type.
func checkRefs(doc *yamldoc.Doc, m *v1alpha1.Plugin, files map[string]fileInfo, l *diag.List) {
	ref := func(ptr, p string, wantDir bool, what string) {
		clean, err := CleanRef(p)
		if err != nil {
			doc.Errorf(l, ptr, "%v", err)
			return
		}
		fi, ok := files[clean]
		switch {
		case !ok:
			doc.Errorf(l, ptr, "%s %q does not exist in the package", what, p)
		case fi.escapes:
			doc.Errorf(l, ptr, "%s %q is a symlink that points outside the package", what, p)
		case wantDir && !fi.dir:
			doc.Errorf(l, ptr, "%s %q is a file, expected a directory", what, p)
		case !wantDir && fi.dir:
			doc.Errorf(l, ptr, "%s %q is a directory, expected a file", what, p)
		}
	}
	s := m.Spec
	if s.Values != nil && s.Values.Schema != "" {
		ref("/spec/values/schema", s.Values.Schema, false, "values schema")
	}
	if c := s.Contributes; c != nil {
		for i, n := range c.Nodes {
			np := "/spec/contributes/nodes/" + strconv.Itoa(i)
			for j, f := range n.Files {
				if f.Source != "" {
					ref(np+"/files/"+strconv.Itoa(j)+"/source", f.Source, false, "file")
				}
			}
			for j, h := range n.Hooks {
				if h.Run.Script != "" {
					ref(np+"/hooks/"+strconv.Itoa(j)+"/run/script", h.Run.Script, false, "script")
				}
			}
		}
		if k := c.Kubernetes; k != nil {
			for i, mf := range k.Manifests {
				ptr := "/spec/contributes/kubernetes/manifests/" + strconv.Itoa(i)
				clean, err := CleanRef(mf)
				if err != nil {
					doc.Errorf(l, ptr, "%v", err)
				} else if _, ok := files[clean]; !ok {
					doc.Errorf(l, ptr, "manifest %q does not exist in the package", mf)
				}
			}
			for i, h := range k.HelmReleases {
				hp := "/spec/contributes/kubernetes/helmReleases/" + strconv.Itoa(i)
				ptr := hp + "/chart"
				if h.Repo != "" || strings.HasPrefix(h.Chart, "oci://") || h.Version != "" {
					checkChartRef(doc, l, hp, h)
				} else if !strings.Contains(h.Chart, "{{") {
					// A packaged chart (.tgz, as helm pull gives it) is a file; else a directory.
					ref(ptr, h.Chart, !IsChartArchive(h.Chart), "chart")
				}
				if clean, err := CleanRef(h.Chart); err == nil && files[clean].dir {
					if _, ok := files[path.Join(clean, "Chart.yaml")]; !ok {
						doc.Errorf(l, ptr, "chart %q has no Chart.yaml", h.Chart)
					}
				}
				for j, f := range h.ValuesFiles {
					ref(hp+"/valuesFiles/"+strconv.Itoa(j), f, false, "values file")
				}
			}
		}
	}
	if r := s.Runtime; r != nil {
		ref("/spec/runtime/command/0", r.Command[0], false, "executable")
	}
	for i, c := range s.Validate {
		if c.Exec != nil && len(c.Exec.Command) > 0 {
			ref("/spec/validate/"+strconv.Itoa(i)+"/exec/command/0", c.Exec.Command[0], false, "executable")
		}
	}
}

// CleanRef turns a file reference from a manifest into a clean slash path inside the
// package, refusing absolute paths and any path that climbs out of the package.
func CleanRef(p string) (string, error) {
	if p == "" {
		return "", errors.New("expected a path inside the package, found an empty string")
	}
	if path.IsAbs(p) || strings.HasPrefix(p, `\`) || (len(p) > 1 && p[1] == ':') {
		return "", fmt.Errorf("expected a path inside the package, found the absolute path %q", p)
	}
	c := path.Clean(strings.TrimSuffix(p, "/"))
	if c == ".." || strings.HasPrefix(c, "../") || slices.Contains(strings.Split(p, "/"), "..") {
		return "", fmt.Errorf("expected a path inside the package, found %q which climbs out of it with '..'", p)
	}
	return c, nil
}

func loadValuesSchema(fsys fs.FS, location string, m *v1alpha1.Plugin, files map[string]fileInfo, l *diag.List) *jsonschema.Schema {
	ref := m.Spec.Values.Schema
	if ref == "" {
		return nil
	}
	clean, err := CleanRef(ref)
	if err != nil || files[clean].dir || files[clean].escapes {
		return nil // reported by checkRefs
	}
	if _, ok := files[clean]; !ok {
		return nil
	}
	file := path.Join(location, clean)
	data, err := readLimited(fsys, clean, MaxManifestSize)
	if err != nil {
		l.Errorf(file, 0, 0, "", "%v", err)
		return nil
	}
	sdoc, sl := yamldoc.Parse(file, data)
	*l = append(*l, sl...)
	if sdoc == nil {
		return nil
	}
	sch, err := yamldoc.CompileSchema("kubeplug:///"+m.Metadata.Name+"/"+clean, sdoc.Value)
	if err != nil {
		if vs := yamldoc.MetaschemaViolations(err); len(vs) > 0 {
			for _, v := range vs {
				if v.AtKey {
					line, col := sdoc.KeyPos(v.Pointer)
					l.Errorf(file, line, col, yamldoc.FieldPath(sdoc, v.Pointer), "invalid JSON Schema: %s", v.Message)
					continue
				}
				sdoc.Errorf(l, v.Pointer, "invalid JSON Schema: %s", v.Message)
			}
			return nil
		}
		l.Errorf(file, 1, 1, "", "invalid JSON Schema: %v", oneLine(err))
		return nil
	}
	return sch
}

func oneLine(err error) string {
	s := err.Error()
	s = strings.ReplaceAll(s, "\n", "; ")
	return strings.Join(strings.Fields(s), " ")
}

func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<20:
		// Rounded, a size just over a limit would read as the limit itself.
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB (" + strconv.FormatInt(n, 10) + " bytes)"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

// checkChartRef checks a release's chart by reference (its chart, repo and
// version), at hp in plugin.yaml. Templated fields are checked once rendered.
func checkChartRef(doc *yamldoc.Doc, l *diag.List, hp string, h v1alpha1.HelmRelease) {
	templated := func(s string) bool { return strings.Contains(s, "{{") }
	switch {
	case h.Version == "":
		doc.Errorf(l, hp+"/chart", "chart %q is named by reference: give its version (a version or a constraint such as 6.x) in version", h.Chart)
	case !templated(h.Version):
		if _, err := semver.NewConstraint(h.Version); err != nil {
			doc.Errorf(l, hp+"/version", "version %q of chart %s is not a version or a version constraint: %v", h.Version, h.Chart, err)
		}
	}
	switch {
	case h.Repo != "":
		if !templated(h.Repo) {
			if err := CheckChartRepoURL(h.Repo); err != nil {
				doc.Errorf(l, hp+"/repo", "%v", err)
			}
		}
		if !templated(h.Chart) && !NameRE.MatchString(h.Chart) {
			doc.Errorf(l, hp+"/chart", "with repo, chart is the chart's name in the repository (a DNS label), found %q", h.Chart)
		}
	case strings.HasPrefix(h.Chart, "oci://"):
		rest := strings.TrimPrefix(h.Chart, "oci://")
		host, repo, _ := strings.Cut(rest, "/")
		last := repo[strings.LastIndex(repo, "/")+1:]
		if !templated(h.Chart) && (host == "" || repo == "" || strings.ContainsAny(last, ":@")) {
			doc.Errorf(l, hp+"/chart", "chart %q: expected oci://REGISTRY/REPOSITORY/CHART without a tag or digest (the version is in version)", h.Chart)
		}
	default:
		doc.Errorf(l, hp+"/version", "version is for a chart by reference (oci://… or with repo); chart %q is a path in the package, whose Chart.yaml gives its version", h.Chart)
	}
}

// CheckChartRepoURL checks the URL of a Helm chart repository: https, or plain
// http to a loopback address.
func CheckChartRepoURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("invalid Helm repository URL %q: %w", raw, err)
	case u.User != nil:
		return fmt.Errorf("chart repository URL %s: credentials do not belong in a URL (they would be printed)", u.Redacted())
	case u.Scheme == "https" && u.Host != "":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("chart repository %s: plain http is accepted for loopback addresses only; use https", raw)
	}
	return fmt.Errorf("chart repository %q: expected the https:// URL of a Helm chart repository", raw)
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsChartArchive reports whether a release's chart names a packaged chart (a
// gzipped tar, as `helm package` and `helm pull` write) rather than a directory.
func IsChartArchive(ref string) bool {
	return strings.HasSuffix(ref, ".tgz") || strings.HasSuffix(ref, ".tar.gz")
}
