package action

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/pkg/archive"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/expansion"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/sign"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// ExpansionLint checks expansion packages: directories being authored or archives
// made by expansion create (kubeplug expansion lint).
type ExpansionLint struct {
	cfg *Config
	// Limits bound what a package may hold; zero fields take expansion's defaults.
	Limits expansion.Limits
}

// NewExpansionLint returns an ExpansionLint action.
func NewExpansionLint(cfg *Config) *ExpansionLint { return &ExpansionLint{cfg: cfg} }

// Run checks each path and returns how many expansions read and every problem found.
func (a *ExpansionLint) Run(ctx context.Context, paths ...string) (int, diag.List) {
	var l diag.List
	n := 0
	for _, p := range paths {
		a.cfg.logger().Debug("linting expansion", "path", p)
		pkg, pl := expansion.Open(ctx, p, a.Limits)
		l = append(l, pl...)
		if pkg != nil && pkg.Manifest != nil {
			n++
		}
	}
	l.Sort()
	return n, l
}

// ExpansionInfo is what expansion inspect prints about one package.
type ExpansionInfo struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	Location    string `json:"location"`
	// Digest is the SHA-256 of checksums.txt; empty for an unpacked source.
	Digest string `json:"digest,omitempty"`
	Signed bool   `json:"signed"`
	// Files and Bytes count every file.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Plugins are the plugin paths and pinned references.
	Plugins            []string `json:"plugins,omitempty"`
	Charts             []string `json:"charts,omitempty"`
	Images             []string `json:"images,omitempty"`
	Hooks              []string `json:"hooks,omitempty"`
	NodeFiles          []string `json:"nodeFiles,omitempty"`
	SkipSteps          []string `json:"skipSteps,omitempty"`
	SkipConditions     []string `json:"skipConditions,omitempty"`
	DelegateConditions []string `json:"delegateConditions,omitempty"`
	// Overrides names the plugins (and "provider") whose values it overrides.
	Overrides []string `json:"overrides,omitempty"`
}

// ExpansionInspect describes an expansion package (kubeplug expansion inspect).
type ExpansionInspect struct {
	cfg    *Config
	Limits expansion.Limits
}

// NewExpansionInspect returns an ExpansionInspect action.
func NewExpansionInspect(cfg *Config) *ExpansionInspect { return &ExpansionInspect{cfg: cfg} }

// Run reads the package at path (checking it as lint does) and describes it.
func (a *ExpansionInspect) Run(ctx context.Context, path string) (*ExpansionInfo, diag.List) {
	pkg, l := expansion.Open(ctx, path, a.Limits)
	if pkg == nil || pkg.Manifest == nil {
		return nil, l
	}
	return describeExpansion(pkg), l
}

func describeExpansion(pkg *expansion.Package) *ExpansionInfo {
	m := pkg.Manifest
	info := &ExpansionInfo{
		Name: m.Metadata.Name, Version: m.Metadata.Version, Description: m.Metadata.Description,
		Location: pkg.Location, Digest: pkg.Digest(), Signed: pkg.Signature != nil,
		Images: pkg.Images, SkipSteps: m.Spec.SkipSteps, SkipConditions: m.Spec.SkipConditions,
	}
	for _, f := range pkg.Files {
		info.Files++
		info.Bytes += f.Size
	}
	for _, p := range m.Spec.Plugins {
		if p.Path != "" {
			info.Plugins = append(info.Plugins, p.Path)
		} else {
			info.Plugins = append(info.Plugins, p.Ref+"@"+p.Digest)
		}
	}
	for _, c := range m.Spec.Charts {
		info.Charts = append(info.Charts, c.Name+" ("+c.Path+")")
	}
	for _, h := range m.Spec.Hooks {
		info.Hooks = append(info.Hooks, h.At+"/"+h.Name)
	}
	for _, n := range m.Spec.Nodes {
		for _, h := range n.Hooks {
			info.Hooks = append(info.Hooks, h.At+"/"+h.Name)
		}
		for _, f := range n.Files {
			info.NodeFiles = append(info.NodeFiles, f.Path)
		}
	}
	for _, d := range m.Spec.DelegateConditions {
		info.DelegateConditions = append(info.DelegateConditions, d.Check+" -> "+d.Operator+" sets "+d.Condition)
	}
	if o := m.Spec.Overrides; o != nil {
		for name := range o.Plugins {
			info.Overrides = append(info.Overrides, name)
		}
		sort.Strings(info.Overrides)
		if len(o.Provider) > 0 {
			info.Overrides = append(info.Overrides, "provider")
		}
	}
	sort.Strings(info.Hooks)
	sort.Strings(info.NodeFiles)
	return info
}

// ExpansionVerify checks an expansion package's checksums and signature
// (kubeplug expansion verify).
type ExpansionVerify struct {
	cfg *Config
	// Keys are trusted public key files; with any, a signature by one of them
	// is required.
	Keys   []string
	Limits expansion.Limits
}

// NewExpansionVerify returns an ExpansionVerify action.
func NewExpansionVerify(cfg *Config) *ExpansionVerify { return &ExpansionVerify{cfg: cfg} }

// Run reads the package at path, checks every file against checksums.txt and,
// with Keys, the signature over it; with cl, also that the provider steps and
// conditions it names are the cluster's provider's, and that it skips and
// delegates only what the cluster file's allowlist (spec.expansions.allow)
// allows.
func (a *ExpansionVerify) Run(ctx context.Context, path string, cl *config.Cluster) (*expansion.Verification, diag.List) {
	keys, l := loadKeys(a.Keys)
	if l.HasFatal() {
		return nil, l
	}
	pkg, pl := expansion.Open(ctx, path, a.Limits)
	l = append(l, pl...)
	if pkg == nil || l.HasFatal() {
		return nil, l
	}
	v, vl := pkg.Verify(keys)
	l = append(l, vl...)
	if cl != nil {
		// The provider's steps and conditions it names must be the cluster's
		// provider's.
		l = append(l, pkg.CheckProviderNames(providerSteps(cl.Spec.Spec.Provider))...)
	}
	if cl != nil {
		allow, where, al := siteAllowlist(cl, keys)
		if l = append(l, al...); !al.HasFatal() {
			l = append(l, pkg.CheckAllowed(allow, where)...)
		}
	}
	l.Sort()
	return v, l
}

// loadKeys reads trusted public key files.
func loadKeys(files []string) ([]*sign.PublicKey, diag.List) {
	var l diag.List
	var keys []*sign.PublicKey
	for _, f := range files {
		b, err := bounded.ReadFile(f, bounded.MaxKeySize)
		if err != nil {
			l.Errorf(f, 0, 0, "", "cannot read the public key: %v", err)
			continue
		}
		k, err := sign.LoadPublicKey(f, b)
		if err != nil {
			l.Errorf(f, 0, 0, "", "%v", err)
			continue
		}
		keys = append(keys, k)
	}
	return keys, l
}

// ExpansionCreate packs an expansion (kubeplug expansion create).
type ExpansionCreate struct {
	cfg *Config
	// Images are pulled into the package besides those the manifest and the
	// cluster's render name.
	Images []string
	// Key is a private key file to sign the package with (from plugin keygen);
	// Password decrypts it.
	Key      string
	Password []byte
	// Registry pulls the plugins the manifest names by reference.
	Registry *oci.Client
	// Mirrors say where images are pulled from instead of their own registry
	// (expansion create --image-mirror).
	Mirrors []expansion.Mirror
	// Archives are docker save tarballs and OCI image layout directories whose
	// images are packed besides the pulled ones (expansion create --image-archive).
	Archives []string
	Limits   expansion.Limits
}

// NewExpansionCreate returns an ExpansionCreate action.
func NewExpansionCreate(cfg *Config) *ExpansionCreate { return &ExpansionCreate{cfg: cfg} }

// ExpansionCreated says what create packed.
type ExpansionCreated struct {
	expansion.Written
	File string `json:"file"`
	// Images are every image packed, and RenderImages those the cluster's
	// render references (with the objects that do).
	Images       []string             `json:"images"`
	RenderImages []expansion.ImageUse `json:"renderImages,omitempty"`
}

// Run packs the expansion whose manifest is manifest (its directory is the
// source) into out. With cl, the cluster is rendered as render does and every
// image its Kubernetes objects and charts reference is packed too — with a
// manifest, the cluster as the expansion changes it (merged as up merges it:
// the plugins it carries and enables in, the built-in ones it skips out), so
// that the package holds what up will find missing; with cl and no manifest,
// the expansion is made from the cluster alone: named after it, holding those
// images and every plugin package it resolves to that is not built in.
func (a *ExpansionCreate) Run(ctx context.Context, manifest string, cl *config.Cluster, out string) (*ExpansionCreated, diag.List) {
	var l diag.List
	opts := expansion.CreateOptions{Images: a.Images, Archives: a.Archives, Plugins: a.Registry, Mirrors: a.Mirrors, Limits: a.Limits, Logger: a.cfg.logger()}
	if opts.Signer = a.signer(&l); l.HasFatal() {
		return nil, l
	}
	res := &ExpansionCreated{File: out}
	src := ""
	if manifest != "" {
		src = filepath.Dir(manifest)
		if filepath.Base(manifest) != expansion.ManifestFile {
			l.Errorf(manifest, 0, 0, "", "expected the expansion's %s (its directory is what is packed), found %s", expansion.ManifestFile, filepath.Base(manifest))
			return nil, l
		}
	}
	if cl != nil && src != "" {
		// Render the cluster as up will with this expansion.
		merged, work := a.withExpansion(ctx, cl, src, out, &l)
		if work != "" {
			defer func() { _ = os.RemoveAll(work) }()
		}
		if merged == nil {
			return nil, l
		}
		opts.Pulled, cl = work, merged
	}
	if cl != nil {
		r := a.cfg.newRun(cl, true)
		defer r.close()
		uses := renderedImages(ctx, r, cl, &l)
		if l.HasFatal() {
			return nil, l
		}
		res.RenderImages = uses
		opts.URLFiles = r.urlFiles
		opts.Images, opts.Why = imagesWhy(opts.Images, uses)
		if src == "" {
			dir, err := os.MkdirTemp(filepath.Dir(out), ".expansion-src-")
			if err != nil {
				l.Errorf(out, 0, 0, "", "%v", err)
				return nil, l
			}
			defer func() { _ = os.RemoveAll(dir) }()
			if err := clusterExpansion(dir, cl, r); err != nil {
				l.Errorf(cl.File, 0, 0, "", "making the expansion: %v", err)
				return nil, l
			}
			src = dir
		}
	}
	if src == "" {
		l.Errorf("", 0, 0, "", "nothing to pack: give an expansion.yaml, a cluster file, or both")
		return nil, l
	}
	w, cl2 := expansion.Create(ctx, src, out, opts)
	l = append(l, cl2...)
	if w == nil {
		return nil, l
	}
	res.Written = *w
	res.Images = w.Images
	l.Sort()
	return res, l
}

// signer loads the private key the package is signed with, if a.Key is set;
// an error goes to l.
func (a *ExpansionCreate) signer(l *diag.List) *sign.Signer {
	if a.Key == "" {
		return nil
	}
	b, err := bounded.ReadFile(a.Key, bounded.MaxKeySize)
	if err != nil {
		l.Errorf(a.Key, 0, 0, "", "cannot read the private key: %v", err)
		return nil
	}
	s, err := sign.LoadSigner(b, a.Password)
	if err != nil {
		l.Errorf(a.Key, 0, 0, "", "private key %s: %v", a.Key, err)
		return nil
	}
	return s
}

// withExpansion is cl as the expansion source src changes it, merged as up
// merges it, and the work directory the expansion's plugins were pulled into
// (the caller removes it; "" when none was made); nil, with the errors in l,
// when that fails.
func (a *ExpansionCreate) withExpansion(ctx context.Context, cl *config.Cluster, src, out string, l *diag.List) (*config.Cluster, string) {
	work, err := os.MkdirTemp("", "kubeplug-expansion-create-")
	if err != nil {
		l.Errorf(out, 0, 0, "", "%v", err)
		return nil, ""
	}
	set, sl := expansion.OpenSourceSet(ctx, src, expansion.SourceOptions{WorkDir: work, Plugins: a.Registry, Limits: a.Limits})
	*l = append(*l, sl...)
	if set == nil || sl.HasFatal() {
		return nil, work
	}
	merged, ml := mergedCluster(cl, set)
	*l = append(*l, set.Locate(ml)...)
	if ml.HasFatal() {
		return nil, work
	}
	return merged, work
}

// renderedImages renders cl as render does, in the run r, and says every
// image its Kubernetes objects and charts reference; errors go to l.
func renderedImages(ctx context.Context, r *run, cl *config.Cluster, l *diag.List) []expansion.ImageUse {
	rl := r.pipeline(ctx, append([]step{resolveStep}, through(stage.Render)...)...)
	*l = append(*l, rl...)
	if rl.HasFatal() {
		return nil
	}
	in := r.renderInput()
	in.Plan = r.plan.Doc(r.model)
	files, fl := render.Files(ctx, in)
	*l = append(*l, fl...)
	if fl.HasFatal() {
		return nil
	}
	uses, err := scanRender(files)
	if err != nil {
		l.Errorf(cl.File, 0, 0, "", "scanning the render for images: %v", err)
		return nil
	}
	return uses
}

// imagesWhy adds the images of uses to images, and says for each what
// references it: the objects and files, joined by "and".
func imagesWhy(images []string, uses []expansion.ImageUse) ([]string, map[string]string) {
	why := map[string]string{}
	for _, u := range uses {
		images = append(images, u.Image)
		if w := u.Object + " in " + u.File; why[u.Image] == "" {
			why[u.Image] = w
		} else if !strings.Contains(why[u.Image], w) {
			why[u.Image] += " and " + w
		}
	}
	return images, why
}

// mergedCluster is cl with set merged into a copy of its spec, as a run with
// --expansion-dir merges it (the file is not changed).
func mergedCluster(cl *config.Cluster, set *expansion.Set) (*config.Cluster, diag.List) {
	var l diag.List
	b, err := json.Marshal(cl.Spec)
	spec := &v1alpha1.Cluster{}
	if err == nil {
		err = json.Unmarshal(b, spec)
	}
	if err != nil {
		l.Errorf(cl.File, 0, 0, "", "expansion: copying the cluster spec: %v", err)
		return nil, l
	}
	if l = set.Merge(spec); l.HasFatal() {
		return nil, l
	}
	out := *cl
	out.Spec = spec
	return &out, l
}

// scanRender finds the images of the rendered Kubernetes objects (manifests and
// charts), sorted by image, then object.
func scanRender(files map[string][]byte) ([]expansion.ImageUse, error) {
	var uses []expansion.ImageUse
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasPrefix(name, "kubernetes/") || !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") {
			continue
		}
		u, err := expansion.ScanImages(name, files[name])
		if err != nil {
			return nil, err
		}
		uses = append(uses, u...)
	}
	slices.SortStableFunc(uses, func(a, b expansion.ImageUse) int {
		return cmp.Or(strings.Compare(a.Image, b.Image), strings.Compare(a.Object, b.Object))
	})
	return uses, nil
}

// clusterExpansion writes the source of an expansion made from a cluster alone
// into dir: expansion.yaml named after the cluster, and every plugin package it
// resolves to that is not built in, as an archive under plugins/.
func clusterExpansion(dir string, cl *config.Cluster, r *run) error {
	m := v1alpha1.Expansion{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.KindExpansion}
	m.Metadata.Name = cl.Spec.Metadata.Name
	m.Metadata.Version = "0.1.0"
	m.Metadata.Description = "everything cluster " + cl.Spec.Metadata.Name + " needs, packed by kubeplug expansion create"
	if err := os.MkdirAll(filepath.Join(dir, "plugins"), 0o755); err != nil {
		return err
	}
	for _, pl := range r.plan.Plugins {
		p := pl.Package
		if p.Origin == plugin.OriginBuiltin {
			continue
		}
		rel := "plugins/" + p.Name + "-" + p.Version.String() + archive.Ext
		f, err := os.Create(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		err = archive.Write(f, p.FS)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("pack plugin %s: %w", p.ID(), err)
		}
		m.Spec.Plugins = append(m.Spec.Plugins, v1alpha1.ExpansionPlugin{Path: rel})
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, expansion.ManifestFile), b, 0o644)
}

// ExpansionPush pushes an expansion's images to a registry (kubeplug expansion
// push): what up and apply do before deploying, for a site that fills its
// registry first.
type ExpansionPush struct {
	cfg *Config
	// Keys, when any, must verify the expansion's signature.
	Keys []string
	// PlainHTTP talks plain HTTP to the registry.
	PlainHTTP bool
	Limits    expansion.Limits
}

// NewExpansionPush returns an ExpansionPush action.
func NewExpansionPush(cfg *Config) *ExpansionPush { return &ExpansionPush{cfg: cfg} }

// Run verifies the expansion at path and pushes its images to the registry at
// host, under their rewritten names; it returns the references pushed.
func (a *ExpansionPush) Run(ctx context.Context, path, host string) ([]string, diag.List) {
	keys, l := loadKeys(a.Keys)
	if l.HasFatal() {
		return nil, l
	}
	if strings.HasPrefix(host, oci.Scheme) {
		return a.artifact(ctx, path, host, keys)
	}
	work, err := os.MkdirTemp("", "kubeplug-expansion-push-")
	if err != nil {
		l.Errorf(path, 0, 0, "", "%v", err)
		return nil, l
	}
	defer func() { _ = os.RemoveAll(work) }()
	ld, ll := expansion.Load(ctx, path, expansion.UseOptions{Keys: keys, WorkDir: work, Limits: a.Limits})
	l = append(l, ll...)
	if ld == nil {
		return nil, l
	}
	opts := expansion.PushOptions{Insecure: a.PlainHTTP}
	pushed, err := ld.PushImages(ctx, host, opts)
	if err != nil {
		l.Errorf(path, 0, 0, "", "%v", err)
		return pushed, l
	}
	charts, err := ld.PushCharts(ctx, host, opts)
	pushed = append(pushed, charts...)
	if err != nil {
		l.Errorf(path, 0, 0, "", "%v", err)
	}
	return pushed, l
}

// ExpansionTest brings an expansion up on a throwaway local cluster and runs its
// checks (kubeplug expansion test), as plugin test --cluster does for a plugin.
type ExpansionTest struct {
	cfg *Config
	// Keys, when any, must verify the expansion's signature.
	Keys []string
	// Timeout bounds waiting for the cluster's objects (as Up's).
	Timeout time.Duration
}

// NewExpansionTest returns an ExpansionTest action.
func NewExpansionTest(cfg *Config) *ExpansionTest { return &ExpansionTest{cfg: cfg} }

// Run brings up cl — or, when nil, a sample cluster (the control plane and one
// worker) — on the local provider with a state directory of its own, with the
// expansion at path merged as up --expansion-dir merges it, then deletes the
// cluster whatever happened. The user's clusters and kubeconfig are not
// touched.
func (a *ExpansionTest) Run(ctx context.Context, path string, cl *config.Cluster) (*UpResult, diag.List) {
	var l diag.List
	abs, err := filepath.Abs(path)
	if err != nil {
		l.Errorf(path, 0, 0, "", "%v", err)
		return nil, l
	}
	tmp, err := os.MkdirTemp("", "kubeplug-expansion-test-")
	if err != nil {
		l.Errorf(path, 0, 0, "", "%v", err)
		return nil, l
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	// The expansion alone in a directory, as --expansion-dir finds it.
	expDir := filepath.Join(tmp, "expansions")
	if err := os.MkdirAll(expDir, 0o755); err != nil {
		l.Errorf(path, 0, 0, "", "%v", err)
		return nil, l
	}
	if err := os.Symlink(abs, filepath.Join(expDir, filepath.Base(abs))); err != nil {
		l.Errorf(path, 0, 0, "", "%v", err)
		return nil, l
	}
	if cl == nil {
		doc := "apiVersion: kubeplug.dev/v1alpha1\nkind: Cluster\nmetadata: {name: expansion-test}\nspec:\n" +
			"  kubernetesVersion: " + lintKubernetesVersion + "\n  provider: {local: {}}\n  nodePools: [{name: workers, count: 1}]\n" +
			"  plugins:\n    enabled: [{name: control-plane}]\n"
		var pl diag.List
		if cl, pl = config.Parse(filepath.Join(tmp, "cluster.yaml"), []byte(doc)); cl == nil {
			return nil, append(l, pl...)
		}
	} else {
		// The user's cluster on the local provider, whatever it names.
		cp := *cl
		spec := *cl.Spec
		spec.Spec.Provider = &v1alpha1.Provider{Local: &v1alpha1.LocalProvider{}}
		cp.Spec = &spec
		cl = &cp
	}
	cfg := *a.cfg
	cfg.Expansions = ExpansionUse{Dirs: []string{expDir}, Keys: a.Keys}
	stateDir := filepath.Join(tmp, "state")
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		down := NewDown(&cfg)
		down.StateDir, down.Purge, down.KeepPlugins = stateDir, true, true
		if _, dl := down.Run(dctx, cl); dl.HasFatal() {
			l = append(l, dl...)
		}
	}()
	up := NewUp(&cfg)
	up.StateDir = stateDir
	up.Timeout = a.Timeout
	res, ul := up.Run(ctx, cl)
	l = append(l, ul...)
	return res, l
}

// artifact verifies the expansion archive at path and pushes it whole, as one
// OCI artifact, to ref (oci://HOST/REPO:TAG): what the controller's
// spec.expansions pull. It returns the reference pushed, by digest.
func (a *ExpansionPush) artifact(ctx context.Context, path, ref string, keys []*sign.PublicKey) ([]string, diag.List) {
	var l diag.List
	pkg, ol := expansion.Open(ctx, path, a.Limits)
	if l = append(l, ol...); pkg == nil || l.HasFatal() {
		return nil, l
	}
	if !pkg.Archive || !strings.HasSuffix(path, ".tar") {
		l.Errorf(path, 0, 0, "", "push an expansion to %s as the uncompressed .tar archive kubeplug expansion create writes, not a directory or a gzipped archive", ref)
		return nil, l
	}
	v, vl := pkg.Verify(keys)
	if l = append(l, vl...); vl.HasFatal() {
		return nil, l
	}
	c, err := oci.New(oci.Options{PlainHTTP: a.PlainHTTP})
	if err != nil {
		l.Errorf(path, 0, 0, "", "%v", err)
		return nil, l
	}
	pushed, err := c.PushExpansion(ctx, path, ref, oci.ExpansionConfig{Name: pkg.Name(), Version: pkg.Manifest.Metadata.Version, Digest: v.Digest})
	if err != nil {
		l.Errorf(path, 0, 0, "", "%v", err)
		return nil, l
	}
	r, _ := oci.ParseRef(pushed.Ref)
	r.Reference = pushed.Manifest
	return []string{pushed.Ref, r.String()}, l
}
