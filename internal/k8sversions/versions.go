package k8sversions

import (
	_ "embed"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

//go:embed versions.yaml
var versionsYAML []byte

// File is where the table comes from, as errors name it.
const File = "internal/k8sversions/versions.yaml"

// ErrUnsupported means the table names no such Kubernetes version.
var ErrUnsupported = errors.New("unsupported Kubernetes version")

// Version is one supported Kubernetes version and what goes with it.
type Version struct {
	// Kubernetes is the version, such as "1.37.1".
	Kubernetes string `json:"kubernetes"`
	// Etcd, Kwok and Containerd are the versions kubeplug pins for it.
	Etcd       string `json:"etcd"`
	Kwok       string `json:"kwok"`
	Containerd string `json:"containerd"`
	// Source is the make target that builds this version from Go modules (the
	// offline path) into _output/<Source>/bin; empty when none does.
	Source string `json:"source"`
}

// Checksum says where an artifact's published digest is.
type Checksum struct {
	// Algorithm is sha256 or sha512.
	Algorithm string `json:"algorithm"`
	// Kind is "file" (URL holds the digest) or "sums" (a list; Name's line counts).
	Kind string `json:"kind"`
	URL  string `json:"url"`
	Name string `json:"name,omitempty"`
}

// Artifact is one binary of a version and where its release publishes it.
type Artifact struct {
	// Name is the binary's name in the cache's bin directory.
	Name string `json:"name"`
	URL  string `json:"url"`
	// Member is the file's path inside a .tar.gz URL; empty for a plain binary.
	Member   string   `json:"member,omitempty"`
	Checksum Checksum `json:"checksum"`
}

// Table is versions.yaml.
type Table struct {
	Versions  []Version  `json:"versions"`
	Artifacts []Artifact `json:"artifacts"`
}

// Default is the embedded table, parsed once and shared by every caller (an
// apply asks for it; a controller runs thousands): read it, never change it.
// Parse errors are a build defect, caught by the package's tests.
func Default() *Table { return defaultTable() }

var defaultTable = sync.OnceValue(func() *Table {
	t, err := Parse(versionsYAML)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", File, err))
	}
	return t
})

// Parse reads and checks a table: every version strict semver and listed once,
// every artifact with a URL and a known checksum algorithm and kind.
//
// Branches: one check per field of the table's entries, each naming what is
// wrong; they share the entry being checked.
func Parse(b []byte) (*Table, error) {
	var t Table
	if err := yaml.UnmarshalStrict(b, &t); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	seen := map[string]bool{}
	for i, v := range t.Versions {
		if _, err := semver.StrictNewVersion(v.Kubernetes); err != nil {
			return nil, fmt.Errorf("versions[%d].kubernetes %q: %w", i, v.Kubernetes, err)
		}
		if seen[v.Kubernetes] {
			return nil, fmt.Errorf("versions[%d].kubernetes %q: listed twice", i, v.Kubernetes)
		}
		seen[v.Kubernetes] = true
		for field, s := range map[string]string{"etcd": v.Etcd, "kwok": v.Kwok, "containerd": v.Containerd} {
			if _, err := semver.StrictNewVersion(s); err != nil {
				return nil, fmt.Errorf("versions[%d].%s %q: %w", i, field, s, err)
			}
		}
	}
	for i, a := range t.Artifacts {
		switch {
		case a.Name == "" || a.URL == "" || a.Checksum.URL == "":
			return nil, fmt.Errorf("artifacts[%d]: name, url and checksum.url are required", i)
		case a.Checksum.Algorithm != "sha256" && a.Checksum.Algorithm != "sha512":
			return nil, fmt.Errorf("artifacts[%d] (%s): checksum.algorithm %q, want sha256 or sha512", i, a.Name, a.Checksum.Algorithm)
		case a.Checksum.Kind != "file" && a.Checksum.Kind != "sums":
			return nil, fmt.Errorf("artifacts[%d] (%s): checksum.kind %q, want file or sums", i, a.Name, a.Checksum.Kind)
		case a.Checksum.Kind == "sums" && a.Checksum.Name == "":
			return nil, fmt.Errorf("artifacts[%d] (%s): checksum.kind sums needs checksum.name", i, a.Name)
		}
	}
	return &t, nil
}

// Supported lists the table's Kubernetes versions, newest first.
func (t *Table) Supported() []string {
	var out []string
	for _, v := range t.Versions {
		out = append(out, v.Kubernetes)
	}
	slices.SortFunc(out, func(a, b string) int {
		return semver.MustParse(b).Compare(semver.MustParse(a))
	})
	return out
}

// Etcd returns the etcd release that goes with Kubernetes version v: the table's
// for that version, else for the newest entry of the same minor, else for the
// newest entry (a version the table does not name still gets an image to render).
func (t *Table) Etcd(v string) string {
	want, _ := semver.NewVersion(strings.TrimPrefix(v, "v"))
	var sameMinor, newest *Version
	var sameV, newestV *semver.Version
	for i := range t.Versions {
		e := &t.Versions[i]
		ev := semver.MustParse(e.Kubernetes) // Parse checked it
		if want != nil && ev.Equal(want) {
			return e.Etcd
		}
		if want != nil && ev.Major() == want.Major() && ev.Minor() == want.Minor() && (sameV == nil || ev.GreaterThan(sameV)) {
			sameMinor, sameV = e, ev
		}
		if newestV == nil || ev.GreaterThan(newestV) {
			newest, newestV = e, ev
		}
	}
	switch {
	case sameMinor != nil:
		return sameMinor.Etcd
	case newest != nil:
		return newest.Etcd
	}
	return ""
}

// Lookup returns the entry of Kubernetes version v ("1.37.1" or "v1.37.1"). Any
// other version, another patch release included, is an error wrapping
// ErrUnsupported that lists the supported ones.
func (t *Table) Lookup(v string) (Version, error) {
	want := strings.TrimPrefix(v, "v")
	for _, e := range t.Versions {
		if e.Kubernetes == want {
			return e, nil
		}
	}
	return Version{}, fmt.Errorf("%w %s: the local provider runs Kubernetes %s (the versions in %s)",
		ErrUnsupported, want, strings.Join(t.Supported(), ", "), File)
}

// Expand fills s's placeholders for version v on this machine's OS and
// architecture.
func (v Version) Expand(s string) string {
	return v.expand(s, runtime.GOOS, runtime.GOARCH)
}

func (v Version) expand(s, goos, goarch string) string {
	return strings.NewReplacer(
		"{kubernetes}", v.Kubernetes, "{etcd}", v.Etcd, "{kwok}", v.Kwok, "{containerd}", v.Containerd,
		"{os}", goos, "{arch}", goarch,
	).Replace(s)
}
