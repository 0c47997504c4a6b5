package expansion

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/sign"
)

// PluginPrefix prefixes the name of the plugin that carries an expansion's node
// files and hooks into the model, so that plan and render show them "by
// expansion-NAME" and two expansions that write one file differently conflict as
// two plugins do.
const PluginPrefix = "expansion-"

// UseOptions say which expansions a run uses and how they are checked.
type UseOptions struct {
	// Dirs are scanned for expansions: every subdirectory holding
	// expansion.yaml and every .tar, .tar.gz or .tgz file, in name order.
	Dirs []string
	// Keys, when any, must verify every expansion's signature.
	Keys []*sign.PublicKey
	// WorkDir receives the unpacked archives and the generated plugins; the
	// caller removes it.
	WorkDir string
	// Limits bound each package.
	Limits Limits
}

// Loaded is one expansion a run uses.
type Loaded struct {
	*Package
	// Root is the directory holding its files: the expansion itself, or where
	// its archive was unpacked.
	Root string
	// Verification says what verified it; nil for a source not packed yet
	// (OpenSourceSet).
	Verification *Verification

	// pulled holds the plugins pulled for references when they are not under
	// Root (OpenSourceSet).
	pulled string
}

// Set is the expansions of a run, in name order.
type Set struct {
	Expansions []*Loaded
	work       string
}

// Scan finds, reads and verifies every expansion in opts.Dirs: each must have
// checksums that every file matches and, with opts.Keys, a signature by one of
// them. Archives are unpacked into opts.WorkDir (the bytes unpacked are checked
// against the digests read). Two expansions of one name are refused, naming both.
func Scan(ctx context.Context, opts UseOptions) (*Set, diag.List) {
	var l diag.List
	s := &Set{work: opts.WorkDir}
	byName := map[string]string{}
	for _, dir := range opts.Dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			l.Errorf(dir, 0, 0, "", "cannot read the expansion directory: %v", unwrapPath(err))
			continue
		}
		for _, e := range entries {
			loc := filepath.Join(dir, e.Name())
			if e.Type()&os.ModeSymlink != 0 {
				// A link to an expansion elsewhere: use what it names.
				if loc, err = filepath.EvalSymlinks(loc); err != nil {
					l.Errorf(filepath.Join(dir, e.Name()), 0, 0, "", "%v", unwrapPath(err))
					continue
				}
			}
			fi, err := os.Stat(loc)
			switch {
			case err != nil:
				continue
			case !fi.IsDir() && !fi.Mode().IsRegular() && isArchiveName(e.Name()):
				// Named as listed (not as a symlink resolves): a FIFO would block
				// and a device never end.
				l.Errorf(filepath.Join(dir, e.Name()), 0, 0, "", "cannot read the expansion: it is a %s, not a directory or a regular archive file", bounded.Kind(fi.Mode()))
				continue
			case fi.IsDir():
				if _, err := os.Stat(filepath.Join(loc, ManifestFile)); err != nil {
					continue
				}
			case isArchiveName(e.Name()):
			default:
				continue
			}
			ld, ll := Load(ctx, loc, opts)
			l = append(l, ll...)
			if ld == nil {
				continue
			}
			name := ld.Manifest.Metadata.Name
			if other, dup := byName[name]; dup {
				l.Errorf(loc, 0, 0, "", "expansion %s is also at %s: remove one of them", name, other)
				continue
			}
			byName[name] = loc
			s.Expansions = append(s.Expansions, ld)
		}
	}
	slices.SortFunc(s.Expansions, func(a, b *Loaded) int { return strings.Compare(a.Manifest.Metadata.Name, b.Manifest.Metadata.Name) })
	l.Sort()
	return s, l
}

// Load reads and verifies the one expansion at loc as [Scan] does, unpacking an
// archive's files (but the images of an uncompressed one, which are pushed
// straight from it) into opts.WorkDir. It is nil when any diagnostic is fatal.
func Load(ctx context.Context, loc string, opts UseOptions) (*Loaded, diag.List) {
	pkg, l := Open(ctx, loc, opts.Limits)
	if pkg == nil || l.HasFatal() {
		return nil, l
	}
	v, vl := pkg.Verify(opts.Keys)
	l = append(l, vl...)
	if vl.HasFatal() {
		return nil, l
	}
	ld := &Loaded{Package: pkg, Root: loc, Verification: v}
	if pkg.Archive {
		ld.Root = filepath.Join(opts.WorkDir, "unpacked", pkg.Manifest.Metadata.Name+"-"+strings.TrimPrefix(v.Digest, "sha256:")[:12])
		// Images are pushed straight from an uncompressed archive; a
		// gzipped one cannot be read at an offset.
		if err := unpack(ctx, pkg, ld.Root, pkg.offsets == nil); err != nil {
			l.Errorf(loc, 0, 0, "", "unpacking: %v", err)
			return nil, l
		}
	}
	return ld, l
}

func isArchiveName(n string) bool {
	return strings.HasSuffix(n, ".tar") || strings.HasSuffix(n, ".tar.gz") || strings.HasSuffix(n, ".tgz")
}

// unpack writes the files of the archive p into dir (the images only when
// images is set), checking each against the digest Open read: an archive
// replaced between the two reads is refused.
func unpack(ctx context.Context, p *Package, dir string, images bool) error {
	f, _, err := bounded.OpenFile(p.Location)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	tr, _, closeFn, err := tarReader(ctxReader{ctx, f})
	if err != nil {
		return err
	}
	defer closeFn()
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeRegA { //nolint:staticcheck // TypeRegA is how old tars mark files
			continue
		}
		name, err := EntryName(h.Name)
		if err != nil {
			return err
		}
		want, ok := p.Files[name]
		if !ok || want.Size != h.Size {
			return fmt.Errorf("entry %q changed since the archive was verified", h.Name)
		}
		if !images && strings.HasPrefix(name, ImagesDir+"/") {
			continue
		}
		if err := writeChecked(filepath.Join(dir, filepath.FromSlash(name)), tr, want); err != nil {
			return err
		}
	}
}

func writeChecked(dst string, r io.Reader, want File) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if want.Executable {
		mode = 0o755
	}
	o, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(o, h), io.LimitReader(r, want.Size))
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != want.Digest {
		return fmt.Errorf("%s changed since the archive was verified (digest %s, verified %s)", want.Path, got, want.Digest)
	}
	return nil
}

// Skips reports whether any expansion skips step, and which.
func (s *Set) Skips(step string) (string, bool) {
	for _, e := range s.Expansions {
		if slices.Contains(e.Manifest.Spec.SkipSteps, step) {
			return e.Manifest.Metadata.Name, true
		}
	}
	return "", false
}

// Merge changes the cluster spec c as the expansions say (MergeProvider, then
// MergePlugins): their plugin
// packages become sources, the plugin carrying each one's node files and hooks
// is added and enabled, value overrides are merged over the file's values (two
// expansions setting one value differently are refused, naming both), provider
// overrides over spec.provider, and the built-in plugins named in skipSteps are
// no longer enabled.
func (s *Set) Merge(c *v1alpha1.Cluster) diag.List {
	l := s.MergeProvider(c)
	l = append(l, s.MergePlugins(c)...)
	l.Sort()
	return l
}

// MergeProvider merges the expansions' provider overrides over c's
// spec.provider (up merges them before it chooses the provider, the rest
// after); two expansions setting one field differently are refused, naming both.
func (s *Set) MergeProvider(c *v1alpha1.Cluster) diag.List {
	var l diag.List
	set := map[string]*Loaded{}
	vals := map[string]any{}
	for _, e := range s.Expansions {
		o := e.Manifest.Spec.Overrides
		if o == nil || len(o.Provider) == 0 {
			continue
		}
		conflict := false
		for ptr, v := range flatten(map[string]any(o.Provider), "") {
			if prev, ok := set[ptr]; ok && !reflect.DeepEqual(vals[ptr], v) {
				e.doc.Errorf(&l, "/spec/overrides/provider"+ptr, "expansions %s and %s set the provider's %s differently (%s and %s): remove one", prev.Manifest.Metadata.Name, e.Manifest.Metadata.Name, ptr, show(vals[ptr]), show(v))
				conflict = true
				continue
			}
			set[ptr], vals[ptr] = e, v
		}
		if conflict {
			continue
		}
		if err := mergeProvider(c, o.Provider); err != nil {
			e.doc.Errorf(&l, "/spec/overrides/provider", "%v", err)
		}
	}
	l.Sort()
	return l
}

// MergePlugins is Merge without the provider overrides.
func (s *Set) MergePlugins(c *v1alpha1.Cluster) diag.List {
	var l diag.List
	if len(s.Expansions) == 0 {
		return l
	}
	if c.Spec.Plugins == nil {
		c.Spec.Plugins = &v1alpha1.ClusterPlugins{}
	}
	ps := c.Spec.Plugins
	values := map[string]setBy{} // plugin + pointer -> value
	crd := true                  // the first expansion that delegates brings the SiteCondition CRD
	for _, e := range s.Expansions {
		m := e.Manifest
		for _, p := range m.Spec.Plugins {
			dir := filepath.Join(e.Root, filepath.FromSlash(p.Path))
			if p.Path == "" {
				dir = filepath.Join(e.pulledRoot(), filepath.FromSlash(PulledPluginPath(p.Digest)))
			}
			ps.Sources = append(ps.Sources, v1alpha1.Source{Dir: dir})
		}
		if len(m.Spec.Nodes) > 0 || len(m.Spec.DelegateConditions) > 0 {
			withCRD := crd && len(m.Spec.DelegateConditions) > 0
			if withCRD {
				crd = false
			}
			dir, err := s.expansionPlugin(e, withCRD)
			if err != nil {
				l.Errorf(e.where(ManifestFile), 0, 0, "", "making plugin %s%s: %v", PluginPrefix, m.Metadata.Name, err)
				continue
			}
			ps.Sources = append(ps.Sources, v1alpha1.Source{Dir: dir})
			ps.Enabled = append(ps.Enabled, v1alpha1.PluginRef{Name: PluginPrefix + m.Metadata.Name})
		}
		if o := m.Spec.Overrides; o != nil {
			mergeOverrides(ps, e, o.Plugins, values, &l)
		}
		for _, st := range m.Spec.SkipSteps {
			if name, ok := strings.CutPrefix(st, PluginStepPrefix); ok {
				ps.Enabled = slices.DeleteFunc(ps.Enabled, func(r v1alpha1.PluginRef) bool { return r.Name == name })
			}
		}
	}
	l.Sort()
	return l
}

// setBy is a plugin's value an expansion's overrides set, and the expansion.
type setBy struct {
	value any
	by    *Loaded
}

// mergeOverrides merges the plugins' values the expansion e overrides into
// ps, enabling those not enabled yet; a value two expansions set differently
// (values records who set what) is an error.
func mergeOverrides(ps *v1alpha1.ClusterPlugins, e *Loaded, plugins map[string]map[string]any, values map[string]setBy, l *diag.List) {
	for _, name := range sortedKeys(plugins) {
		base := yamldoc.Pointer("spec", "overrides", "plugins", name)
		for ptr, v := range flatten(plugins[name], "") {
			key := name + "\x00" + ptr
			if prev, ok := values[key]; ok && !reflect.DeepEqual(prev.value, v) {
				e.doc.Errorf(l, base+ptr, "expansions %s and %s set plugin %s's value %s differently (%s and %s): remove one", prev.by.Manifest.Metadata.Name, e.Manifest.Metadata.Name, name, ptr, show(prev.value), show(v))
				continue
			}
			values[key] = setBy{v, e}
		}
		i := slices.IndexFunc(ps.Enabled, func(r v1alpha1.PluginRef) bool { return r.Name == name })
		if i < 0 {
			ps.Enabled = append(ps.Enabled, v1alpha1.PluginRef{Name: name})
			i = len(ps.Enabled) - 1
		}
		ps.Enabled[i].Values = mergeValues(ps.Enabled[i].Values, plugins[name])
	}
}

// expansionPlugin writes the plugin carrying e's node files and hooks and the
// SiteCondition objects its delegated conditions are set on (with the CRD when
// withCRD), and returns its directory.
func (s *Set) expansionPlugin(e *Loaded, withCRD bool) (string, error) {
	m := e.Manifest
	dir := filepath.Join(s.work, "plugins", PluginPrefix+m.Metadata.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	pl := v1alpha1.Plugin{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindPlugin}
	pl.Metadata.Name = PluginPrefix + m.Metadata.Name
	pl.Metadata.Version = m.Metadata.Version
	pl.Metadata.Description = "the node files, hooks and delegated conditions of expansion " + m.Metadata.Name
	pl.Spec.Contributes = &v1alpha1.Contributions{Nodes: m.Spec.Nodes}
	if len(m.Spec.DelegateConditions) > 0 {
		pl.Spec.Contributes.Kubernetes = &v1alpha1.Kubernetes{Manifests: []string{"manifests/"}}
		for _, d := range m.Spec.DelegateConditions {
			// Its SiteConditions exist before the delegating plugins' checks wait on them.
			if p, _, _ := strings.Cut(d.Check, "/"); !slices.Contains(pl.Spec.Before, p) {
				pl.Spec.Before = append(pl.Spec.Before, p)
			}
		}
		if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "manifests", "siteconditions.yaml"), []byte(conditionObjects(m, withCRD)), 0o644); err != nil {
			return "", err
		}
	}
	b, err := yaml.Marshal(pl)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), b, 0o644); err != nil {
		return "", err
	}
	for _, n := range m.Spec.Nodes {
		var refs []string
		for _, f := range n.Files {
			refs = append(refs, f.Source)
		}
		for _, h := range n.Hooks {
			refs = append(refs, h.Run.Script)
		}
		for _, r := range refs {
			if r == "" {
				continue
			}
			if err := copyTree(filepath.Join(e.Root, filepath.FromSlash(r)), filepath.Join(dir, filepath.FromSlash(r))); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
}

// copyTree copies a file, or a directory's files, from src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		return linkOrCopy(p, filepath.Join(dst, rel))
	})
}

// flatten lists the leaves of a values tree by JSON pointer.
func flatten(v any, ptr string) map[string]any {
	out := map[string]any{}
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		out[ptr] = v
		return out
	}
	for k, sub := range m {
		for p, leaf := range flatten(sub, ptr+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")) {
			out[p] = leaf
		}
	}
	return out
}

// mergeValues deep-merges src over dst (maps merge, anything else replaces).
func mergeValues(dst, src map[string]any) map[string]any {
	out := make(map[string]any, len(dst)+len(src))
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := out[k].(map[string]any); ok {
				out[k] = mergeValues(dm, sm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// mergeProvider deep-merges values over the cluster's spec.provider.
func mergeProvider(c *v1alpha1.Cluster, over map[string]any) error {
	var cur map[string]any
	if c.Spec.Provider != nil {
		b, err := json.Marshal(c.Spec.Provider)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &cur); err != nil {
			return err
		}
	}
	b, err := json.Marshal(mergeValues(cur, over))
	if err != nil {
		return err
	}
	p := &v1alpha1.Provider{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return fmt.Errorf("the provider overrides do not fit spec.provider: %w", err)
	}
	c.Spec.Provider = p
	return nil
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Images maps every image the expansions carry (its full reference) to the
// expansion that carries it.
func (s *Set) Images() map[string]*Loaded {
	out := map[string]*Loaded{}
	for _, e := range s.Expansions {
		for _, img := range e.Images {
			if _, ok := out[NormalizeImage(img)]; !ok {
				out[NormalizeImage(img)] = e
			}
		}
	}
	return out
}

// Hook is an installer hook with the expansion it belongs to.
type Hook struct {
	v1alpha1.InstallerHook
	Expansion *Loaded
	// Step says when in the run it runs ("after step connect"), for its
	// messages; default HookSteps[At].
	Step string
}

// HookSteps says when each installer hook point runs, by the steps of the
// run's pipeline (see pkg/action/pipeline.go).
var HookSteps = map[string]string{
	v1alpha1.HookBeforeCluster:     "before step provision (up) or connect (apply)",
	v1alpha1.HookControlPlaneReady: "after step connect",
	v1alpha1.HookAfterInstall:      "after step record",
}

// Hooks lists the installer hooks at an entry point, in expansion then file order.
func (s *Set) Hooks(at string) []Hook {
	var out []Hook
	for _, e := range s.Expansions {
		for _, h := range e.Manifest.Spec.Hooks {
			if h.At == at {
				out = append(out, Hook{h, e, HookSteps[at]})
			}
		}
	}
	return out
}

// maxHookOutput bounds what a failed hook's message quotes of its output.
const maxHookOutput = 4 << 10

// Run runs the hook on this machine in its expansion's directory, with env
// added to kubeplug's environment (a variable env sets replaces kubeplug's),
// and waits for it within its timeout (default 5m). HOME is an empty
// directory of the hook's own, removed when it ends, so that what a hook
// finds under ~ (~/.kube/config, ~/.docker/config.json) is never the user's:
// with the KUBECONFIG the run gives it, a hook's kubectl reaches the cluster
// being built, and `kubectl --kubeconfig ~/.kube/config` finds no file. A
// failure names the expansion, the hook, its point and step, and quotes the
// end of its output.
func (h Hook) Run(ctx context.Context, env []string) error {
	home, err := os.MkdirTemp("", "kubeplug-hook-home-")
	if err != nil {
		return fmt.Errorf("expansion %s: installer hook %s/%s: its HOME: %w", h.Expansion.Manifest.Metadata.Name, h.Expansion.Manifest.Metadata.Name, h.Name, err)
	}
	defer func() { _ = os.RemoveAll(home) }()
	timeout := 5 * time.Minute
	if h.Timeout != "" {
		if d, err := time.ParseDuration(h.Timeout); err == nil {
			timeout = d
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := h.Command
	if h.Script != "" {
		argv = []string{filepath.Join(h.Expansion.Root, filepath.FromSlash(h.Script))}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = h.Expansion.Root
	cmd.Env = append(append(os.Environ(), hookHome(home)...), env...)
	cmd.WaitDelay = 5 * time.Second
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	step := h.Step
	if step == "" {
		step = HookSteps[h.At]
	}
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("expansion %s: installer hook %s/%s (%s, %s) did not finish within %s; output: %s", h.Expansion.Manifest.Metadata.Name, h.Expansion.Manifest.Metadata.Name, h.Name, h.At, step, timeout, out.String())
	}
	if err != nil {
		return fmt.Errorf("expansion %s: installer hook %s/%s (%s, %s) failed: %w; output: %s", h.Expansion.Manifest.Metadata.Name, h.Expansion.Manifest.Metadata.Name, h.Name, h.At, step, err, out.String())
	}
	return nil
}

// hookHome is the environment that points a hook's home, and the
// configuration and cache directories found through it, at home.
func hookHome(home string) []string {
	return []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share")}
}

// tailBuffer keeps the last maxHookOutput bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > maxHookOutput {
		t.b = t.b[len(t.b)-maxHookOutput:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return strings.TrimSpace(string(t.b)) }

// Locate points the diagnostics about an expansion's generated plugin (its node
// files and hooks: the generated plugin.yaml, or the plugin by name) at the
// expansion's own expansion.yaml, with the field and line there; those about a
// file it carries (a source: file that failed to render as a template) at that
// file in the expansion, with the line and column there, naming the expansion.
func (s *Set) Locate(l diag.List) diag.List {
	out := slices.Clone(l)
	for i, d := range out {
		for _, e := range s.Expansions {
			gen := filepath.Join(s.work, "plugins", PluginPrefix+e.Manifest.Metadata.Name, "plugin.yaml")
			re := regexp.MustCompile(regexp.QuoteMeta(gen) + `(:[0-9]+)*`)
			d.Message = re.ReplaceAllLiteralString(d.Message, e.where(ManifestFile))
		}
		out[i] = d
		for _, e := range s.Expansions {
			plugin := PluginPrefix + e.Manifest.Metadata.Name
			gen := filepath.Join(s.work, "plugins", plugin)
			if d.File != gen && !strings.HasPrefix(d.File, gen+string(filepath.Separator)) {
				continue
			}
			if rel, ok := strings.CutPrefix(d.File, gen+string(filepath.Separator)); ok && rel != "plugin.yaml" {
				// One of the expansion's own files, copied into the plugin (a
				// source: file rendered as a template): the line is the same.
				d.File = e.where(filepath.ToSlash(rel))
				d.Plugin = ""
				d.Message = "expansion " + e.Manifest.Metadata.Name + ": " + d.Message
				out[i] = d
				break
			}
			d.File = e.where(ManifestFile)
			d.Line, d.Column = 0, 0
			if f, ok := strings.CutPrefix(d.Field, "spec.contributes.nodes"); ok {
				d.Field = "spec.nodes" + f
				d.Line, d.Column = e.doc.Pos(fieldPointer(d.Field))
			}
			out[i] = d
			break
		}
	}
	return out
}

// fieldPointer turns a field path such as spec.nodes[0].files[1] into a JSON
// pointer.
func fieldPointer(field string) string {
	r := strings.NewReplacer("[", "/", "]", "", ".", "/")
	return "/" + r.Replace(field)
}

// ImageLayout returns the directory of the expansion's OCI image layout,
// unpacking it from an uncompressed archive first (into the expansion's
// unpacked files, each checked against its digest) when it is not on disk.
func (e *Loaded) ImageLayout(ctx context.Context) (string, error) {
	dir := filepath.Join(e.Root, ImagesDir)
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err == nil {
		return dir, nil
	}
	if !e.Archive {
		return "", fmt.Errorf("%s has no %s/index.json", e.Location, ImagesDir)
	}
	if err := unpack(ctx, e.Package, e.Root, true); err != nil {
		return "", err
	}
	return dir, nil
}
