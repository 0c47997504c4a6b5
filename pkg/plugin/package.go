package plugin

import (
	"io/fs"
	"path"

	"github.com/Masterminds/semver/v3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
)

// ManifestFile is the name of a package's manifest.
const ManifestFile = "plugin.yaml"

// Limits on package contents. They keep a hostile or broken package from exhausting
// memory: kubeplug reads manifests whole.
const (
	// MaxManifestSize bounds plugin.yaml and values schemas.
	MaxManifestSize = 1 << 20
	// MaxFileSize bounds any one file in a package.
	MaxFileSize = 16 << 20
	// MaxPackageSize bounds the sum of a package's files.
	MaxPackageSize = 64 << 20
)

// Origin says where a package was found: the name shown with it and the precedence
// of what is found there. Origins are open: any source declares its own, as data (a
// remote catalog names itself and picks a rank). A plugin name found at a higher rank
// shadows the same name at lower ranks (see package source).
type Origin struct {
	// Name is shown with every package of the origin: builtin, contrib, user, or a
	// source's own.
	Name string
	// Rank orders origins by precedence, higher wins.
	Rank int
}

// String returns the origin's name.
func (o Origin) String() string { return o.Name }

// The origins of kubeplug's own sources, lowest precedence first. Their ranks leave
// room between them for other sources.
var (
	OriginBuiltin = Origin{Name: "builtin", Rank: 0}
	OriginContrib = Origin{Name: "contrib", Rank: 100}
	OriginUser    = Origin{Name: "user", Rank: 200}
)

// Package is one version of one plugin, loaded and checked.
type Package struct {
	// Manifest is plugin.yaml, decoded.
	Manifest *v1alpha1.Plugin
	// Name and Version come from the manifest's metadata.
	Name    string
	Version *semver.Version
	// Origin and Location say where the package was found; Location is a directory
	// path for packages on disk and builtin:plugins/NAME for built-in ones.
	Origin   Origin
	Location string
	// Digest is "sha256:" and the hex digest of the package's canonical walk.
	Digest string
	// FS is the package's files, rooted at the package directory.
	FS fs.FS
	// Schema is the compiled values schema, nil when the package has none.
	Schema *jsonschema.Schema
	// KubernetesVersion is the parsed spec.kubernetesVersion, nil when unset.
	KubernetesVersion *semver.Constraints
	// SignedBy names the trusted key, "NAME (ID)", whose signature over the
	// package's bytes a source with a trust policy verified when it fetched
	// it; empty when nothing verified a signature.
	SignedBy string

	doc *yamldoc.Doc
}

// ManifestPos locates a JSON pointer into plugin.yaml for diagnostics: the file,
// line and column (0 when unknown) and the field path.
func (p *Package) ManifestPos(ptr string) (file string, line, col int, field string) {
	file = path.Join(p.Location, ManifestFile)
	if p.doc == nil {
		return file, 0, 0, yamldoc.FieldPath(nil, ptr)
	}
	line, col = p.doc.Pos(ptr)
	return file, line, col, yamldoc.FieldPath(p.doc, ptr)
}

// ID returns name@version.
func (p *Package) ID() string { return p.Name + "@" + p.Version.String() }

// Sensitive returns the JSON pointers of the plugin's sensitive values.
func (p *Package) Sensitive() []string {
	if p.Manifest.Spec.Values == nil {
		return nil
	}
	return p.Manifest.Spec.Values.Sensitive
}

// Defaults returns the plugin's default values (never nil; do not modify).
func (p *Package) Defaults() v1alpha1.Values {
	if p.Manifest.Spec.Values == nil || p.Manifest.Spec.Values.Defaults == nil {
		return v1alpha1.Values{}
	}
	return p.Manifest.Spec.Values.Defaults
}
