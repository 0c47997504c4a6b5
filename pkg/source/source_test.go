package source_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/source"
)

func manifest(name, version, spec string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte("apiVersion: kubeplug.dev/v1alpha1\nkind: Plugin\nmetadata: {name: " + name + ", version: " + version + "}\nspec: " + spec + "\n")}
}

func lines(l diag.List) []string {
	l.Sort()
	out := []string{}
	for _, d := range l {
		out = append(out, d.String())
	}
	return out
}

// TestListReadsManifestsOnly lists a tree whose packages are broken in different
// ways: a broken plugin.yaml is reported by the listing, the rest of a package only
// when it is fetched.
func TestListReadsManifestsOnly(t *testing.T) {
	fsys := fstest.MapFS{
		"a/plugin.yaml":        manifest("a", "1.0.0", `{requires: [{name: b, version: ">=1.1"}], conflicts: [c], after: [d], before: [e], kubernetesVersion: ">=1.30"}`),
		"b/1/plugin.yaml":      manifest("b", "1.0.0", `{}`),
		"b/2/plugin.yaml":      manifest("b", "1.2.0", `{values: {schema: missing.json}}`),
		"bad/plugin.yaml":      manifest("bad", "one", `{}`),
		".hidden/plugin.yaml":  manifest("hidden", "1.0.0", `{}`),
		"testdata/plugin.yaml": manifest("testdata", "1.0.0", `{}`),
	}
	idx, l := source.List(t.Context(), source.FS(plugin.OriginUser, fsys, "plugins"))
	if got, want := lines(l), []string{`plugins/bad/plugin.yaml:3:32: metadata.version: expected a semantic version such as 1.4.0, found "one"`}; !slices.Equal(got, want) {
		t.Errorf("listing diagnostics:\n%q\nwant\n%q", got, want)
	}
	if got := idx.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("names = %v", got)
	}
	a := idx.Versions("a")[0]
	if a.Location != "plugins/a" || a.Origin != plugin.OriginUser || a.Digest != "" || a.KubernetesVersion.String() != ">=1.30" ||
		len(a.Requires) != 1 || a.Requires[0].Name != "b" || a.Requires[0].Constraint.String() != ">=1.1" ||
		!slices.Equal(a.Conflicts, []string{"c"}) || !slices.Equal(a.After, []string{"d"}) || !slices.Equal(a.Before, []string{"e"}) {
		t.Errorf("listing of a = %+v", a)
	}
	var got []string
	for _, v := range idx.Versions("b") {
		got = append(got, v.Version.String())
	}
	if !slices.Equal(got, []string{"1.2.0", "1.0.0"}) {
		t.Errorf("versions of b = %v, want newest first", got)
	}

	b12, fl := idx.Fetch(t.Context(), idx.Versions("b")[0])
	if b12 != nil || !strings.Contains(fl.String(), `plugins/b/2/plugin.yaml:4:25: spec.values.schema: values schema "missing.json" does not exist in the package`) {
		t.Errorf("fetching the broken b 1.2.0: %v, %s", b12, fl)
	}
	p, fl := idx.Fetch(t.Context(), a)
	if p == nil || len(fl) != 0 || p.Location != "plugins/a" || !strings.HasPrefix(p.Digest, "sha256:") {
		t.Fatalf("fetching a: %v, %s", p, fl)
	}
	if again, _ := idx.Fetch(t.Context(), a); again != p {
		t.Errorf("a second fetch loaded the package again")
	}
}

func TestListUnreadableDirectory(t *testing.T) {
	_, l := source.List(t.Context(), source.Dir(plugin.OriginUser, t.TempDir()+"/nope"))
	if !l.HasFatal() || !strings.Contains(l.String(), "plugin directory cannot be read: no such file or directory") {
		t.Errorf("diagnostics: %s", l)
	}
}

// TestPrecedence: a higher rank shadows every version of a name at lower ranks, with
// a warning; the same name and version twice at one rank is fatal; an origin of a
// source's own (a catalog) takes part by its rank alone.
func TestPrecedence(t *testing.T) {
	catalog := plugin.Origin{Name: "catalog", Rank: plugin.OriginUser.Rank + 50}
	tests := []struct {
		name    string
		sources []source.Source
		want    map[string]string // name -> origin of the visible versions
		diags   []string
	}{{
		name: "user shadows builtin",
		sources: []source.Source{
			source.FS(plugin.OriginBuiltin, fstest.MapFS{"x/plugin.yaml": manifest("x", "1.0.0", "{}"), "y/plugin.yaml": manifest("y", "1.0.0", "{}")}, "builtin:plugins"),
			source.FS(plugin.OriginUser, fstest.MapFS{"x/plugin.yaml": manifest("x", "0.1.0", "{}")}, "mine"),
		},
		want:  map[string]string{"x": "user", "y": "builtin"},
		diags: []string{"mine/x/plugin.yaml: warning: user plugin x shadows the builtin plugin x@1.0.0 at builtin:plugins/x"},
	}, {
		name: "a catalog of its own rank shadows user directories",
		sources: []source.Source{
			source.FS(catalog, fstest.MapFS{"x/plugin.yaml": manifest("x", "2.0.0", "{}")}, "cat"),
			source.FS(plugin.OriginUser, fstest.MapFS{"x/plugin.yaml": manifest("x", "3.0.0", "{}")}, "mine"),
		},
		want:  map[string]string{"x": "catalog"},
		diags: []string{"cat/x/plugin.yaml: warning: catalog plugin x shadows the user plugin x@3.0.0 at mine/x"},
	}, {
		name: "duplicates at one rank",
		sources: []source.Source{
			source.FS(plugin.OriginUser, fstest.MapFS{"x/plugin.yaml": manifest("x", "1.0.0", "{}")}, "one"),
			source.FS(plugin.OriginUser, fstest.MapFS{"x/plugin.yaml": manifest("x", "1.0.0", "{}")}, "two"),
		},
		want:  map[string]string{"x": "user"},
		diags: []string{"two/x/plugin.yaml: plugin x@1.0.0 is also at one/x; each name and version may appear once per origin (user)"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx, l := source.List(t.Context(), tt.sources...)
			if got := lines(l); !slices.Equal(got, tt.diags) {
				t.Errorf("diagnostics:\n%q\nwant\n%q", got, tt.diags)
			}
			got := map[string]string{}
			for _, v := range idx.All() {
				got[v.Name] = v.Origin.Name
			}
			if len(got) != len(tt.want) {
				t.Errorf("visible: %v, want %v", got, tt.want)
			}
			for n, o := range tt.want {
				if got[n] != o {
					t.Errorf("%s comes from %q, want %q", n, got[n], o)
				}
			}
		})
	}
}

// lying lists what it is told to and fetches a package of its own choosing.
type lying struct {
	list  []*source.Version
	fetch *plugin.Package
}

func (s lying) List(context.Context) ([]*source.Version, diag.List) { return s.list, nil }
func (s lying) Fetch(context.Context, *source.Version) (*plugin.Package, diag.List) {
	return s.fetch, nil
}

// TestFetchChecksTheListing: what a source fetches must be what it listed.
func TestFetchChecksTheListing(t *testing.T) {
	pkg, l := plugin.Load(fstest.MapFS{"plugin.yaml": manifest("x", "1.0.0", "{}")}, plugin.OriginUser, "x")
	if pkg == nil {
		t.Fatal(l)
	}
	// listed returns the listing of pkg, changed to another version or digest.
	listed := func(version, digest string) *source.Version {
		idx, _ := source.NewIndex([]*plugin.Package{pkg})
		v := *idx.Versions("x")[0]
		if version != "" {
			v.Version = semver.MustParse(version)
		}
		v.Digest = digest
		return &v
	}
	tests := []struct {
		name string
		v    *source.Version
		want string
	}{
		{"as listed", listed("", pkg.Digest), ""},
		{"no digest announced", listed("", ""), ""},
		{"another digest", listed("", "sha256:0000"), "x/plugin.yaml: plugin x@1.0.0 has digest " + pkg.Digest + ", but the source announced sha256:0000"},
		{"another version", listed("1.0.1", ""), "x/plugin.yaml: the source listed plugin x@1.0.1 here, but the package fetched is x@1.0.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx, l := source.List(t.Context(), lying{list: []*source.Version{tt.v}, fetch: pkg})
			if len(l) > 0 {
				t.Fatal(l)
			}
			got, fl := idx.Fetch(t.Context(), idx.All()[0])
			if tt.want == "" {
				if got != pkg || len(fl) > 0 {
					t.Errorf("fetch: %v, %s", got, fl)
				}
				return
			}
			if got != nil || fl.String() != tt.want {
				t.Errorf("fetch: %v,\n%s\nwant\n%s", got, fl, tt.want)
			}
		})
	}
}

func mustLoad(t *testing.T, name, version string) *plugin.Package {
	t.Helper()
	p, l := plugin.Load(fstest.MapFS{"plugin.yaml": manifest(name, version, "{}")}, plugin.OriginUser, name)
	if p == nil {
		t.Fatal(l)
	}
	return p
}

// TestFetchAllIsOrdered: packages and diagnostics come in the order asked, whatever
// order the fetches finish in.
func TestFetchAllIsOrdered(t *testing.T) {
	fsys := fstest.MapFS{}
	names := []string{"e", "d", "c", "b", "a"}
	for _, n := range names {
		fsys[n+"/plugin.yaml"] = manifest(n, "1.0.0", "{values: {schema: gone.json}}")
	}
	fsys["c/plugin.yaml"] = manifest("c", "1.0.0", "{}")
	idx, l := source.List(t.Context(), source.FS(plugin.OriginUser, fsys, "p"))
	if len(l) > 0 {
		t.Fatal(l)
	}
	var vs []*source.Version
	for _, n := range names {
		vs = append(vs, idx.Versions(n)[0])
	}
	for range 20 {
		pkgs, fl := source.FetchAll(t.Context(), idx, vs, 3)
		for i, p := range pkgs {
			if (p != nil) != (names[i] == "c") {
				t.Fatalf("package %d (%s) = %v", i, names[i], p)
			}
		}
		var files []string
		for _, d := range fl {
			files = append(files, d.File)
		}
		if want := []string{"p/e/plugin.yaml", "p/d/plugin.yaml", "p/b/plugin.yaml", "p/a/plugin.yaml"}; !slices.Equal(files, want) {
			t.Fatalf("diagnostics in order %v, want %v", files, want)
		}
	}
}

func TestFind(t *testing.T) {
	idx, _ := source.NewIndex([]*plugin.Package{mustLoad(t, "x", "1.0.0"), mustLoad(t, "x", "1.2.0"), mustLoad(t, "x", "2.0.0")})
	tests := []struct{ constraint, want string }{
		{"", "2.0.0"},
		{"^1", "1.2.0"},
		{"<1.1", "1.0.0"},
		{">=3", `no version of plugin "x" matches ">=3" (available: 2.0.0, 1.2.0, 1.0.0)`},
		{"one", `invalid version constraint "one": improper constraint: "one"`},
	}
	for _, tt := range tests {
		v, err := idx.Find("x", tt.constraint)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = v.Version.String()
		}
		if got != tt.want {
			t.Errorf("Find(x, %q) = %s, want %s", tt.constraint, got, tt.want)
		}
	}
	if _, err := idx.Find("y", ""); err == nil || err.Error() != `plugin "y" not found in any source` {
		t.Errorf("Find(y) = %v", err)
	}
}

// TestFetchSeesChanges: a package changed between listing and fetching is loaded as
// it is now, and refused when it no longer agrees with what the resolver read.
func TestFetchSeesChanges(t *testing.T) {
	fsys := fstest.MapFS{"x/plugin.yaml": manifest("x", "1.0.0", "{}"), "y/plugin.yaml": manifest("y", "1.0.0", "{}")}
	idx, l := source.List(t.Context(), source.FS(plugin.OriginUser, fsys, "p"))
	if len(l) > 0 {
		t.Fatal(l)
	}
	fsys["x/plugin.yaml"] = manifest("x", "1.1.0", "{}")
	fsys["y/plugin.yaml"] = manifest("y", "1.0.0", "{conflicts: [x]}")
	if p, l := idx.Fetch(t.Context(), idx.Versions("x")[0]); p != nil || l.String() != "p/x/plugin.yaml: the source listed plugin x@1.0.0 here, but the package fetched is x@1.1.0" {
		t.Errorf("fetching the changed x: %v, %s", p, l)
	}
	want := "p/y/plugin.yaml: spec.conflicts: plugin y@1.0.0 has spec.conflicts [x], but the source listed it with []; the resolver chose it by the listing"
	if p, l := idx.Fetch(t.Context(), idx.Versions("y")[0]); p != nil || l.String() != want {
		t.Errorf("fetching the changed y: %v,\n%s\nwant\n%s", p, l, want)
	}
}
