package importer

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// ErrFormat is wrapped by the errors of inputs that are not in the importer's
// source format (a Chart.yaml without a name, a YAML file of another kind).
var ErrFormat = errors.New("not the expected format")

// Result is what one import produces.
type Result struct {
	// Packages are written one directory each, at their Dir.
	Packages []*Package
	// Catalog, when set, makes the packages a versioned catalog: each is packaged
	// into an archive under Catalog and an index.yaml lists them, instead of being
	// written as directories side by side.
	Catalog string
	// Report describes the import as a whole when it yields several packages (a
	// catalog); it is written as Catalog's README.
	Report *Report
}

// Package is one plugin package to write.
type Package struct {
	// Dir is the package's directory, relative to the output directory.
	Dir string
	// Manifest is written as plugin.yaml.
	Manifest *v1alpha1.Plugin
	// Files are the package's other files by slash path (charts, manifests,
	// scripts, the original input under original/). README.md is generated from
	// Report.
	Files map[string][]byte
	// Report says what was mapped where.
	Report Report
}

// Report is the generated README of a package: where it came from, what was mapped,
// normalised and left out.
type Report struct {
	// Source names the importer and the input, as the user gave it.
	Source string
	// Original lists the files under original/ and what each is.
	Original []string
	// Mapped are the source fields and where they went.
	Mapped []Mapping
	// Normalised are names and versions changed to kubeplug's rules.
	Normalised []Normalised
	// Unmapped are the source fields the import could not express, each named.
	Unmapped []Unmapped
	// Notes are further things a reviewer must know.
	Notes []string
}

// Mapping is one source field and where it went.
type Mapping struct {
	From, To string
}

// Normalised is a name or version changed to fit kubeplug, with the rule.
type Normalised struct {
	Field, Original, Value, Rule string
}

// Unmapped is a source field the import could not express, and why.
type Unmapped struct {
	Field, Why string
}

// Map records that the source field from went to to.
func (r *Report) Map(from, to string) { r.Mapped = append(r.Mapped, Mapping{From: from, To: to}) }

// Unmap records that the source field could not be mapped.
func (r *Report) Unmap(field, format string, args ...any) {
	r.Unmapped = append(r.Unmapped, Unmapped{Field: field, Why: fmt.Sprintf(format, args...)})
}

// Note records something a reviewer must know.
func (r *Report) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// newPackage returns a package named name at version with an empty contribution.
func newPackage(dir, name, version, description string) *Package {
	return &Package{
		Dir: dir,
		Manifest: &v1alpha1.Plugin{
			APIVersion: v1alpha1.GroupVersion,
			Kind:       v1alpha1.KindPlugin,
			Metadata:   v1alpha1.PluginMetadata{Name: name, Version: version, Description: oneLine(description)},
		},
		Files: map[string][]byte{},
	}
}

// contributes returns the package's contributions, made on first use.
func (p *Package) contributes() *v1alpha1.Contributions {
	if p.Manifest.Spec.Contributes == nil {
		p.Manifest.Spec.Contributes = &v1alpha1.Contributions{}
	}
	return p.Manifest.Spec.Contributes
}

// kubernetes returns the package's Kubernetes contributions, made on first use.
func (p *Package) kubernetes() *v1alpha1.Kubernetes {
	c := p.contributes()
	if c.Kubernetes == nil {
		c.Kubernetes = &v1alpha1.Kubernetes{}
	}
	return c.Kubernetes
}

// controlPlane returns the package's control-plane contributions, made on first use.
func (p *Package) controlPlane() *v1alpha1.ControlPlane {
	c := p.contributes()
	if c.ControlPlane == nil {
		c.ControlPlane = &v1alpha1.ControlPlane{}
	}
	return c.ControlPlane
}

// component returns the named control-plane component, made on first use:
// apiServer, controllerManager, scheduler or etcd.
func (p *Package) component(name string) *v1alpha1.Component {
	cp := p.controlPlane()
	var c **v1alpha1.Component
	switch name {
	case "apiServer":
		c = &cp.APIServer
	case "controllerManager":
		c = &cp.ControllerManager
	case "scheduler":
		c = &cp.Scheduler
	default:
		c = &cp.Etcd
	}
	if *c == nil {
		*c = &v1alpha1.Component{}
	}
	if (*c).Flags == nil {
		(*c).Flags = map[string]string{}
	}
	return *c
}

// cloud returns the package's cloud contributions, made on first use.
func (p *Package) cloud() *v1alpha1.Cloud {
	c := p.contributes()
	if c.Cloud == nil {
		c.Cloud = &v1alpha1.Cloud{}
	}
	return c.Cloud
}

// node returns the node contribution for exactly these roles, made on first use,
// so that one source role's files, units and hooks land in one entry.
func (p *Package) node(roles ...string) *v1alpha1.NodeContribution {
	c := p.contributes()
	for i := range c.Nodes {
		if slices.Equal(c.Nodes[i].Roles, roles) && len(c.Nodes[i].Pools) == 0 {
			return &c.Nodes[i]
		}
	}
	c.Nodes = append(c.Nodes, v1alpha1.NodeContribution{Roles: roles})
	return &c.Nodes[len(c.Nodes)-1]
}

// addFile adds a file to the package at a clean relative path and returns that
// path; a path that leaves the package is an error naming field.
func (p *Package) addFile(field, name string, data []byte) (string, error) {
	clean := path.Clean(strings.TrimPrefix(name, "./"))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") || clean == "." {
		return "", fmt.Errorf("%s: path %q leaves the plugin directory", field, name)
	}
	p.Files[clean] = data
	return clean, nil
}

// oneLine folds a description to its first line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}
