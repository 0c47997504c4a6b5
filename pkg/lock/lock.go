package lock

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/internal/bounded"
)

// FileName is the lock file's name, beside the cluster file.
const FileName = "kubeplug.lock"

// APIVersion and Kind identify a lock file.
const (
	APIVersion = "kubeplug.dev/v1alpha1"
	Kind       = "PluginLock"
)

// maxSize bounds a lock file.
const maxSize = 4 << 20

// File is a lock file's content.
type File struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Plugins are the pinned plugins, sorted by name.
	Plugins []Entry `json:"plugins"`
}

// Entry pins one resolved plugin.
type Entry struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Source is the origin the package came from (builtin, contrib, catalog, user).
	Source string `json:"source"`
	// Digest is the package digest.
	Digest string `json:"digest"`
	// Charts pin the charts the plugin's Helm releases name by reference, sorted
	// by chart.
	Charts []Chart `json:"charts,omitempty"`
}

// Chart pins a chart by reference: the version its constraint resolved to and
// the sha256 of its archive.
type Chart struct {
	// Chart is the chart as the release names it, without version: oci://…/CHART,
	// or REPO/CHART for a chart of the Helm repository REPO.
	Chart   string `json:"chart"`
	Version string `json:"version"`
	// Digest is the archive's sha256, "sha256:HEX".
	Digest string `json:"digest"`
}

// equal reports whether e and g pin the same; withCharts compares their charts too.
func (e Entry) equal(g Entry, withCharts bool) bool {
	return e.Name == g.Name && e.Version == g.Version && e.Source == g.Source && e.Digest == g.Digest &&
		(!withCharts || slices.Equal(e.Charts, g.Charts))
}

// PathFor returns the lock file's path for a cluster file.
func PathFor(clusterFile string) string {
	return filepath.Join(filepath.Dir(clusterFile), FileName)
}

// New returns a lock file of the entries, sorted.
func New(entries []Entry) *File {
	es := slices.Clone(entries)
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	for i := range es {
		es[i].Charts = slices.Clone(es[i].Charts)
		slices.SortFunc(es[i].Charts, func(a, b Chart) int { return strings.Compare(a.Chart, b.Chart) })
	}
	return &File{APIVersion: APIVersion, Kind: Kind, Plugins: es}
}

// Read reads the lock file at path; nil and no error when there is none.
func Read(path string) (*File, error) {
	// Bounded by the bytes read, not the size claimed: /dev/zero or a FIFO
	// named kubeplug.lock is an error within seconds, never an out-of-memory.
	data, err := bounded.ReadFile(path, maxSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lock file %s: %w", path, err)
	}
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("decode lock file %s: %w", path, err)
	}
	if f.APIVersion != APIVersion || f.Kind != Kind {
		return nil, fmt.Errorf("lock file %s: expected apiVersion %s and kind %s", path, APIVersion, Kind)
	}
	return &f, nil
}

// Encode returns the file's bytes, the same for the same entries.
func (f *File) Encode() ([]byte, error) {
	b, err := yaml.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode lock file: %w", err)
	}
	return append([]byte("# Written by kubeplug lock. Pins every resolved plugin by version and digest.\n"), b...), nil
}

// Equal reports whether two lock files pin the same plugins.
func (f *File) Equal(g *File) bool {
	if f == nil || g == nil {
		return f == g
	}
	return slices.EqualFunc(f.Plugins, g.Plugins, func(a, b Entry) bool { return a.equal(b, true) })
}

// EqualPlugins reports whether two lock files pin the same plugins, leaving
// their charts out: what a resolution, before any chart is fetched, can check.
func (f *File) EqualPlugins(g *File) bool {
	if f == nil || g == nil {
		return f == g
	}
	return slices.EqualFunc(f.Plugins, g.Plugins, func(a, b Entry) bool { return a.equal(b, false) })
}

// Chart returns the pin of chart (as Chart.Chart names it) of the named plugin.
func (f *File) Chart(plugin, chart string) (Chart, bool) {
	e, ok := f.Entry(plugin)
	if !ok {
		return Chart{}, false
	}
	for _, c := range e.Charts {
		if c.Chart == chart {
			return c, true
		}
	}
	return Chart{}, false
}

// Diff describes how g differs from f, one line per plugin, sorted.
func (f *File) Diff(g *File) []string {
	old, cur := map[string]Entry{}, map[string]Entry{}
	if f != nil {
		for _, e := range f.Plugins {
			old[e.Name] = e
		}
	}
	if g != nil {
		for _, e := range g.Plugins {
			cur[e.Name] = e
		}
	}
	var out []string
	for n, o := range old {
		c, ok := cur[n]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s %s would be removed", n, o.Version))
		case !c.equal(o, false):
			out = append(out, fmt.Sprintf("%s %s (%s, %s) would become %s (%s, %s)", n, o.Version, o.Source, o.Digest, c.Version, c.Source, c.Digest))
		default:
			out = append(out, chartsDiff(n, o.Charts, c.Charts)...)
		}
	}
	for n, c := range cur {
		if _, ok := old[n]; !ok {
			out = append(out, fmt.Sprintf("%s %s would be added", n, c.Version))
		}
	}
	slices.Sort(out)
	return out
}

// Write writes f to path atomically.
func (f *File) Write(path string) error {
	data, err := f.Encode()
	if err != nil {
		return err
	}
	if old, err := bounded.ReadFile(path, maxSize); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+FileName+".*")
	if err != nil {
		return fmt.Errorf("write lock file %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write lock file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write lock file %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write lock file %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}

// Entry returns the entry that pins the named plugin.
func (f *File) Entry(name string) (Entry, bool) {
	if f == nil {
		return Entry{}, false
	}
	for _, e := range f.Plugins {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// Mismatch returns, for a resolved plugin, why the lock refuses it: its locked
// version has another digest. "" when the lock does not pin that version or agrees.
func (f *File) Mismatch(name, version, digest string) string {
	if f == nil {
		return ""
	}
	for _, e := range f.Plugins {
		if e.Name == name && e.Version == version && e.Digest != digest {
			return fmt.Sprintf("plugin %s@%s has digest %s, but %s pins %s (from %s): the package changed under the same version; if that is intended, run kubeplug lock", name, version, digest, FileName, e.Digest, e.Source)
		}
	}
	return ""
}

// chartsDiff describes how plugin's chart pins cur differ from old.
func chartsDiff(plugin string, old, cur []Chart) []string {
	var out []string
	for _, o := range old {
		i := slices.IndexFunc(cur, func(c Chart) bool { return c.Chart == o.Chart })
		switch {
		case i < 0:
			out = append(out, fmt.Sprintf("%s: chart %s %s would be removed", plugin, o.Chart, o.Version))
		case cur[i] != o:
			out = append(out, fmt.Sprintf("%s: chart %s %s (%s) would become %s (%s)", plugin, o.Chart, o.Version, o.Digest, cur[i].Version, cur[i].Digest))
		}
	}
	for _, c := range cur {
		if !slices.ContainsFunc(old, func(o Chart) bool { return o.Chart == c.Chart }) {
			out = append(out, fmt.Sprintf("%s: chart %s %s would be added", plugin, c.Chart, c.Version))
		}
	}
	return out
}
