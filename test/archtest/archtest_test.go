package archtest_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/kubeplug/kubeplug/test/archtest"
)

// pkg is one package of the build graph.
type pkg struct {
	imports []string
	ours    bool
}

// graph is every package the module's packages build with, from one `go list`.
var graph = sync.OnceValues(func() (map[string]*pkg, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{.Module}} {{join .Imports " "}}`, archtest.Module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	g := map[string]*pkg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		g[f[0]] = &pkg{ours: f[1] == archtest.Module, imports: f[2:]}
	}
	return g, sc.Err()
})

func load(t *testing.T) map[string]*pkg {
	t.Helper()
	g, err := graph()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// rel is path relative to the module, or "" for a package outside it.
func rel(path string) string {
	if path == archtest.Module {
		return "."
	}
	r, ok := strings.CutPrefix(path, archtest.Module+"/")
	if !ok {
		return ""
	}
	return r
}

// under says whether path is prefix or below it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// layerOf returns the index of the layer whose longest prefix holds path (relative
// to the module), or -1.
func layerOf(path string) int {
	best, at := -1, -1
	for i, l := range archtest.Layers {
		for _, p := range l.Prefixes {
			if under(path, p) && len(p) > best {
				best, at = len(p), i
			}
		}
	}
	return at
}

func TestNoPackageImportsUpward(t *testing.T) {
	g := load(t)
	var ours []string
	for path, p := range g {
		if p.ours {
			ours = append(ours, path)
		}
	}
	sort.Strings(ours)
	if len(ours) == 0 {
		t.Fatal("go list found no package of the module")
	}
	used := make([]bool, len(archtest.Exceptions))
	for _, path := range ours {
		from := rel(path)
		lf := layerOf(from)
		if lf < 0 {
			t.Errorf("%s is in no layer: add it to the table in test/archtest/layers.go", from)
			continue
		}
		for _, imp := range g[path].imports {
			to := rel(imp)
			if to == "" {
				continue
			}
			lt := layerOf(to)
			if lt <= lf {
				continue // unplaced targets are reported as packages of their own
			}
			if i := slices.IndexFunc(archtest.Exceptions, func(e archtest.Exception) bool { return e.From == from && e.To == to }); i >= 0 {
				used[i] = true
				continue
			}
			t.Errorf("%s -> %s imports upward (layer %s -> layer %s)", from, to, archtest.Layers[lf].Name, archtest.Layers[lt].Name)
		}
	}
	for i, e := range archtest.Exceptions {
		if !used[i] {
			t.Errorf("exception %s -> %s no longer happens: remove it from the table", e.From, e.To)
		}
	}
}

// TestTheTableIsSound keeps the table readable: every prefix once, and every
// prefix naming a package or a directory of packages that exists.
func TestTheTableIsSound(t *testing.T) {
	g := load(t)
	seen := map[string]string{}
	for _, l := range archtest.Layers {
		for _, p := range l.Prefixes {
			if other, ok := seen[p]; ok {
				t.Errorf("prefix %s is in layers %s and %s", p, other, l.Name)
			}
			seen[p] = l.Name
			found := false
			for path, pk := range g {
				if pk.ours && under(rel(path), p) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("prefix %s of layer %s names no package: remove it", p, l.Name)
			}
		}
	}
}

// deps is every package path links, itself excluded, sorted.
func deps(g map[string]*pkg, path string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		n, ok := g[p]
		if !ok {
			return
		}
		for _, imp := range n.imports {
			if !seen[imp] {
				seen[imp] = true
				walk(imp)
			}
		}
	}
	walk(path)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// matching returns the paths that start with one of prefixes.
func matching(paths, prefixes []string) []string {
	var out []string
	for _, p := range paths {
		for _, pre := range prefixes {
			if strings.HasPrefix(p, pre) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// why returns a chain of imports from path to target, for the failure message.
func why(g map[string]*pkg, from, target string) string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == target {
			var chain []string
			for ; p != ""; p = prev[p] {
				if r := rel(p); r != "" {
					chain = append(chain, r)
				} else {
					chain = append(chain, p)
				}
			}
			slices.Reverse(chain)
			return strings.Join(chain, " -> ")
		}
		if n, ok := g[p]; ok {
			for _, imp := range n.imports {
				if _, ok := prev[imp]; !ok {
					prev[imp] = p
					queue = append(queue, imp)
				}
			}
		}
	}
	return target
}

func TestLoadingLinksNoClusterCode(t *testing.T) {
	g := load(t)
	check := func(t *testing.T, pkgRel string, forbidden []string) {
		t.Helper()
		path := archtest.Module + "/" + pkgRel
		if _, ok := g[path]; !ok {
			t.Fatalf("%s is not in the build graph", pkgRel)
		}
		bad := matching(deps(g, path), forbidden)
		for i, b := range bad {
			if i == 5 {
				t.Errorf("%s links %d more", pkgRel, len(bad)-i)
				break
			}
			t.Errorf("%s links %s: %s", pkgRel, b, why(g, path, b))
		}
	}
	for _, p := range archtest.LoadingPackages {
		t.Run(p, func(t *testing.T) { check(t, p, archtest.NoCluster) })
	}
	t.Run("pkg/plugin links nothing heavy", func(t *testing.T) { check(t, "pkg/plugin", archtest.PluginHeavy) })
	t.Run("api/v1alpha1 links nothing heavy", func(t *testing.T) { check(t, "api/v1alpha1", archtest.PluginHeavy) })
	t.Run("api/controller links apimachinery only", func(t *testing.T) { check(t, "api/controller/v1alpha1", archtest.ControllerAPINoDeps) })
	t.Run("pkg/action links no provider", func(t *testing.T) { check(t, "pkg/action", archtest.ActionNoDeps) })
	t.Run("pkg/controller links no provider", func(t *testing.T) { check(t, "pkg/controller", archtest.ControllerNoDeps) })
	t.Run("the controller binary links no cloud SDK", func(t *testing.T) {
		check(t, "cmd/kubeplug-controller", archtest.ControllerBinaryNoDeps)
		for _, p := range archtest.ControllerBinaryLinks {
			if !slices.Contains(g[archtest.Module+"/cmd/kubeplug-controller"].imports, p) {
				t.Errorf("cmd/kubeplug-controller does not register %s at its edge (a blank import): its ManagedClusters could not use it", p)
			}
		}
	})
	t.Run("the CLI binary links no heavy client it can do without", func(t *testing.T) { check(t, "cmd/kubeplug", archtest.CLIBinaryNoDeps) })
	t.Run("pkg/render", func(t *testing.T) {
		check(t, "pkg/render", archtest.RenderNoDeps)
		for _, imp := range matching(g[archtest.Module+"/pkg/render"].imports, archtest.RenderNoImport) {
			t.Errorf("pkg/render imports %s: it renders, a client is for the layers that deploy", imp)
		}
	})
}

// TestProvidersImportNoOtherProvider keeps the provider seam real: a provider
// (a package ProviderRegistry imports, with every package in its folder)
// imports no package of another provider's folder, so each links only what
// it needs and a new provider copies none of the others' wiring. What two
// providers share (the cluster PKI, the nodes' images and Pod network) lives
// under pkg/provider/internal or beside the providers.
func TestProvidersImportNoOtherProvider(t *testing.T) {
	g := load(t)
	all, ok := g[archtest.Module+"/"+archtest.ProviderRegistry]
	if !ok {
		t.Fatalf("%s is not in the build graph", archtest.ProviderRegistry)
	}
	var providers []string
	for _, imp := range all.imports {
		if r := rel(imp); r != "" && under(r, "pkg/provider") && r != "pkg/provider" {
			providers = append(providers, r)
		}
	}
	if len(providers) < 2 {
		t.Fatalf("%s imports %d providers (%v): the rule holds nothing", archtest.ProviderRegistry, len(providers), providers)
	}
	owner := func(r string) string {
		for _, p := range providers {
			if under(r, p) {
				return p
			}
		}
		return ""
	}
	for path, p := range g {
		from := owner(rel(path))
		if !p.ours || from == "" {
			continue
		}
		for _, imp := range p.imports {
			if to := owner(rel(imp)); to != "" && to != from {
				t.Errorf("%s imports %s: provider %s reaches into provider %s; move what they share under pkg/provider/internal", rel(path), rel(imp), from, to)
			}
		}
	}
}

// TestNothingBelowTheClusterLayerTalksToACluster extends the loading rule to every
// package placed below ClusterLayer, runtimes and engine included, so a new package
// there is held to it without an edit.
func TestNothingBelowTheClusterLayerTalksToACluster(t *testing.T) {
	g := load(t)
	cluster := slices.IndexFunc(archtest.Layers, func(l archtest.Layer) bool { return l.Name == archtest.ClusterLayer })
	if cluster < 0 {
		t.Fatalf("no layer %s in the table", archtest.ClusterLayer)
	}
	var below []string
	for path, p := range g {
		if r := rel(path); p.ours && !slices.Contains(archtest.LinksClientThroughHelm, r) {
			if l := layerOf(r); l >= 0 && l < cluster {
				below = append(below, path)
			}
		}
	}
	sort.Strings(below)
	if len(below) == 0 {
		t.Fatal("no package below the cluster layer")
	}
	for _, path := range below {
		if bad := matching(deps(g, path), archtest.NoCluster); len(bad) > 0 {
			t.Errorf("%s (layer %s) links %d packages that talk to a cluster or a cloud, like %s",
				rel(path), archtest.Layers[layerOf(rel(path))].Name, len(bad), why(g, path, bad[0]))
		}
	}
}

// TestFoldersFormNoCycle reads the tree folder by folder: inside every folder,
// its subfolders (each standing for every package beneath it) import each other
// without a cycle. So the tree itself tells the layering, as kind's does: a
// reader who opens any folder finds its parts stacked, not tangled, and a
// private package sits under the lowest folder that holds all its importers.
// pkg/ counts as a namespace (see elements). Tests are not read: only the packages' own imports.
func TestFoldersFormNoCycle(t *testing.T) {
	g := load(t)
	// edges[dir][a][b]: some package under dir/a imports one under dir/b.
	edges := map[string]map[string]map[string]bool{}
	for path, p := range g {
		from := rel(path)
		if !p.ours || from == "" {
			continue
		}
		for _, imp := range p.imports {
			to := rel(imp)
			if to == "" || to == from {
				continue
			}
			dir, a, b := siblings(from, to)
			if a == "" || b == "" {
				continue // one holds the other
			}
			if edges[dir] == nil {
				edges[dir] = map[string]map[string]bool{}
			}
			if edges[dir][a] == nil {
				edges[dir][a] = map[string]bool{}
			}
			edges[dir][a][b] = true
		}
	}
	dirs := make([]string, 0, len(edges))
	for d := range edges {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		if c := cycle(edges[d]); c != nil {
			t.Errorf("in folder %s, subfolders import each other in a cycle: %s (see why with go list -f '{{.ImportPath}} {{.Imports}}' %s/%s/...)", d, strings.Join(c, " -> "), archtest.Module, path.Join(d, c[0]))
		}
	}
}

// siblings splits two module-relative paths at their deepest common folder: dir,
// and the first element of each below it ("" when one path holds the other).
func siblings(from, to string) (dir, a, b string) {
	f, o := elements(from), elements(to)
	i := 0
	for i < len(f) && i < len(o) && f[i] == o[i] {
		i++
	}
	if i == len(f) || i == len(o) {
		return "", "", ""
	}
	dir = "."
	if i > 0 {
		dir = strings.Join(f[:i], "/")
	}
	return dir, f[i], o[i]
}

// elements are a module-relative path's folders from the root down. pkg/ is a
// namespace, as Go's convention has it, not a folder of one part: each pkg/X
// stands beside internal/, sdk/ and api/ as one element.
func elements(p string) []string {
	if p == "." {
		return nil
	}
	e := strings.Split(p, "/")
	if len(e) > 1 && e[0] == "pkg" {
		e = append([]string{"pkg/" + e[1]}, e[2:]...)
	}
	return e
}

// cycle returns one cycle of the graph, first node repeated at the end, or nil.
func cycle(g map[string]map[string]bool) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found []string
	var visit func(n string) bool
	visit = func(n string) bool {
		color[n] = grey
		stack = append(stack, n)
		next := make([]string, 0, len(g[n]))
		for m := range g[n] {
			next = append(next, m)
		}
		sort.Strings(next)
		for _, m := range next {
			switch color[m] {
			case grey:
				i := slices.Index(stack, m)
				found = append(slices.Clone(stack[i:]), m)
				return true
			case white:
				if visit(m) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	nodes := make([]string, 0, len(g))
	for n := range g {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		if color[n] == white && visit(n) {
			return found
		}
	}
	return nil
}
