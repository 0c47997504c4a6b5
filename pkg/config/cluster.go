package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/bounded"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/lock"
	"github.com/kubeplug/kubeplug/pkg/model"
	"github.com/kubeplug/kubeplug/pkg/oci"
	"github.com/kubeplug/kubeplug/pkg/plugin"
	"github.com/kubeplug/kubeplug/pkg/sign"
	"github.com/kubeplug/kubeplug/pkg/source"
)

var errNotFound = errors.New("file not found")

// MaxFileSize bounds cluster.yaml and values files.
const MaxFileSize = 1 << 20

// Cluster is a loaded, checked cluster.yaml.
type Cluster struct {
	// Spec is the decoded file.
	Spec *v1alpha1.Cluster
	// File is the path the file was read from; Dir is its directory, against which
	// relative paths in the file resolve.
	File, Dir string
	// KubernetesVersion is spec.kubernetesVersion, parsed.
	KubernetesVersion *semver.Version
	// AllowValuesOutside lets valuesFrom read files outside Dir (after following
	// symlinks). Off by default, so that a cluster file cannot quietly pull
	// ~/.aws/credentials or /etc/shadow into a plugin's values; the CLI sets it
	// from --allow-values-outside.
	AllowValuesOutside bool

	doc *yamldoc.Doc
	// entries is the file index of each enabled entry after an edit (Without,
	// Pinned); nil means the file's own order.
	entries []int
}

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

func clusterSchema() (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		schema, schemaErr = yamldoc.CompileSchemaJSON(v1alpha1.ClusterSchemaID, v1alpha1.ClusterSchema())
	})
	return schema, schemaErr
}

// Load reads and checks a cluster file. The cluster is nil when any diagnostic is fatal.
func Load(path string) (*Cluster, diag.List) {
	data, err := readFile(path)
	if err != nil {
		var l diag.List
		l.Errorf(path, 0, 0, "", "%v", err)
		return nil, l
	}
	return Parse(path, data)
}

// readFile reads a cluster or values file, bounded by the bytes actually read
// and, for a FIFO or device, in time (package bounded).
func readFile(path string) ([]byte, error) {
	data, err := bounded.ReadFile(path, MaxFileSize)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, errNotFound
	case errors.Is(err, bounded.ErrIsDir):
		return nil, errors.New("is a directory, expected a YAML file")
	case errors.Is(err, bounded.ErrTooLarge), errors.Is(err, bounded.ErrTimeout), errors.Is(err, bounded.ErrNoData):
		return nil, err
	}
	return nil, fmt.Errorf("cannot read: %w", err)
}

// Parse checks a cluster file's text; file names it in diagnostics and anchors its
// relative paths.
func Parse(file string, data []byte) (*Cluster, diag.List) {
	var l diag.List
	doc, pl := yamldoc.Parse(file, data)
	l = append(l, pl...)
	if doc == nil {
		return nil, l
	}
	sch, err := clusterSchema()
	if err != nil {
		l.Errorf(file, 0, 0, "", "cannot compile the schema: %v", err)
		return nil, l
	}
	if vl := doc.Validate(sch); len(vl) > 0 {
		return nil, append(l, vl...)
	}
	spec := &v1alpha1.Cluster{}
	if !doc.Decode(spec, &l) {
		return nil, l
	}
	c := &Cluster{Spec: spec, File: file, Dir: filepath.Dir(file), doc: doc}
	c.check(&l)
	l.Sort()
	if l.HasFatal() {
		return nil, l
	}
	return c, l
}

// check runs the cluster file's rules, each a named function below, in order;
// every rule reports all it finds, so one run names every problem.
func (c *Cluster) check(l *diag.List) {
	for _, rule := range []func(*diag.List){c.checkVersion, c.checkProvider, c.checkPools, c.checkSources, c.checkEnabled, c.checkOrder} {
		rule(l)
	}
}

// checkVersion: spec.kubernetesVersion is a strict version.
func (c *Cluster) checkVersion(l *diag.List) {
	v, err := semver.StrictNewVersion(c.Spec.Spec.KubernetesVersion)
	if err != nil {
		c.doc.Errorf(l, "/spec/kubernetesVersion", "expected a Kubernetes version such as 1.36.3, found %q", c.Spec.Spec.KubernetesVersion)
	}
	c.KubernetesVersion = v
}

// checkProvider: spec.provider names one provider (none is the default), and
// that provider's own rules (RegisterProviderCheck) hold.
func (c *Cluster) checkProvider(l *diag.List) {
	pr := c.Spec.Spec.Provider
	name, err := v1alpha1.ProviderName(pr)
	if err != nil || pr != nil && name == v1alpha1.DefaultProvider && pr.Local == nil {
		c.doc.Errorf(l, "/spec/provider", "expected one provider, such as local: {}")
		return
	}
	providerChecks.RLock()
	check := providerChecks.m[name]
	providerChecks.RUnlock()
	if check == nil {
		return
	}
	for _, p := range check(&c.Spec.Spec) {
		c.doc.Errorf(l, "/spec"+p.Pointer, "%s", p.Message)
	}
}

// checkPools: node pool names are unique and not the control plane's.
func (c *Cluster) checkPools(l *diag.List) {
	pools := map[string]bool{}
	for i, p := range c.Spec.Spec.NodePools {
		if pools[p.Name] {
			c.doc.Errorf(l, "/spec/nodePools/"+strconv.Itoa(i)+"/name", "duplicate node pool %q", p.Name)
		}
		if p.Name == model.ControlPlanePool {
			c.doc.Errorf(l, "/spec/nodePools/"+strconv.Itoa(i)+"/name", "the pool name %q is reserved for the control-plane machines (see spec.controlPlane)", p.Name)
		}
		if p.MinSize != nil && *p.MinSize > p.Count {
			c.doc.Errorf(l, "/spec/nodePools/"+strconv.Itoa(i)+"/minSize", "expected at most count (%d), the pool's starting size, found %d", p.Count, *p.MinSize)
		}
		if p.MaxSize != nil && *p.MaxSize < p.Count {
			c.doc.Errorf(l, "/spec/nodePools/"+strconv.Itoa(i)+"/maxSize", "expected at least count (%d), the pool's starting size, found %d", p.Count, *p.MaxSize)
		}
		pools[p.Name] = true
	}
}

// checkSources: each of spec.plugins.sources is a directory or a catalog, with
// only the fields its kind reads, and its files exist.
func (c *Cluster) checkSources(l *diag.List) {
	if c.Spec.Spec.Plugins == nil {
		return
	}
	for i, src := range c.Spec.Spec.Plugins.Sources {
		ptr := "/spec/plugins/sources/" + strconv.Itoa(i)
		c.checkSourceWhere(l, ptr, src)
		c.checkSourceType(l, ptr, src)
		c.checkSourceFiles(l, ptr, src)
	}
}

// checkSourceWhere: exactly one of dir and catalog, and it can be read.
func (c *Cluster) checkSourceWhere(l *diag.List, ptr string, src v1alpha1.Source) {
	d := c.doc
	switch {
	case (src.Dir == "") == (src.Catalog == ""):
		d.Errorf(l, ptr, "expected exactly one of dir and catalog")
	case src.Catalog != "":
		if err := source.CheckCatalogURL(src.Catalog); err != nil {
			d.Errorf(l, ptr+"/catalog", "%v", err)
		}
	default:
		dir := c.path(src.Dir)
		switch fi, err := os.Stat(dir); {
		case err != nil:
			d.Errorf(l, ptr+"/dir", "plugin directory %s does not exist", dir)
		case !fi.IsDir() && !fi.Mode().IsRegular():
			d.Errorf(l, ptr+"/dir", "plugin source %s is a %s: expected a directory of plugins or a package archive (a regular file)", dir, bounded.Kind(fi.Mode()))
		}
	}
}

// checkSourceType: type is helm or none, on a catalog; then verify fits the
// source's kind (checkSourceVerify).
func (c *Cluster) checkSourceType(l *diag.List, ptr string, src v1alpha1.Source) {
	switch {
	case src.Type != "" && src.Type != source.SourceTypeHelm:
		c.doc.Errorf(l, ptr+"/type", "expected type helm (a Helm chart repository) or none (a kubeplug catalog), found %q", src.Type)
	case src.Type != "" && src.Catalog == "":
		c.doc.Errorf(l, ptr+"/type", "type is for catalog sources; a dir source holds plugin packages")
	case src.Verify != nil:
		c.checkSourceVerify(l, ptr, src)
	}
}

// checkSourceVerify: a trust policy of the kind the source's packages carry —
// cosign keys for an OCI registry of charts, a PGP keyring for a Helm
// repository's provenance files, signing keys for kubeplug packages — and none
// on a file of KKP ApplicationDefinitions, which is not signed.
func (c *Cluster) checkSourceVerify(l *diag.List, ptr string, src v1alpha1.Source) {
	d := c.doc
	helm, ociCharts := src.Type == source.SourceTypeHelm, strings.HasPrefix(src.Catalog, oci.Scheme)
	switch {
	case helm && ociCharts && src.Verify.Keyring != "":
		d.Errorf(l, ptr+"/verify/keyring", "charts in an OCI registry are checked by their cosign signatures: give cosign public keys in keys, not a PGP keyring")
	case helm && ociCharts:
		c.checkVerify(l, ptr, src)
	case helm:
		c.checkKeyring(l, ptr, src)
	case src.Dir != "" && source.IsKKPFile(src.Dir):
		d.Errorf(l, ptr+"/verify", "%s is a file of KKP ApplicationDefinitions, which is not signed: its charts are fetched by reference and checked under the policy of the catalog source for their repository or registry", src.Dir)
	case src.Verify.Keyring != "":
		d.Errorf(l, ptr+"/verify/keyring", "keyring (a PGP keyring for Helm provenance files) is for type: helm sources")
	default:
		c.checkVerify(l, ptr, src)
	}
}

// checkSourceFiles: caFile and registryConfig are for the catalogs that read
// them, and are files.
func (c *Cluster) checkSourceFiles(l *diag.List, ptr string, src v1alpha1.Source) {
	d := c.doc
	for field, f := range map[string]string{"caFile": src.CAFile, "registryConfig": src.RegistryConfig} {
		switch {
		case f == "":
		case src.Catalog == "":
			d.Errorf(l, ptr+"/"+field, "%s is for catalog sources; a dir source reads files", field)
		case field == "registryConfig" && !strings.HasPrefix(src.Catalog, oci.Scheme):
			d.Errorf(l, ptr+"/"+field, "registryConfig holds registry credentials: it is for oci:// catalogs")
		default:
			if fi, err := os.Stat(c.path(f)); err != nil || !fi.Mode().IsRegular() {
				d.Errorf(l, ptr+"/"+field, "%s %s does not exist or is not a file", field, c.path(f))
			}
		}
	}
}

// checkEnabled: each plugin is enabled once, with a valid version constraint,
// valuesFrom entries of one kind each, and node pools the spec has.
func (c *Cluster) checkEnabled(l *diag.List) {
	s := c.Spec.Spec
	if s.Plugins == nil {
		return
	}
	d := c.doc
	pools := map[string]bool{}
	for _, p := range s.NodePools {
		pools[p.Name] = true
	}
	enabled := map[string]bool{}
	for i, e := range s.Plugins.Enabled {
		ptr := "/spec/plugins/enabled/" + strconv.Itoa(i)
		if enabled[e.Name] {
			d.Errorf(l, ptr+"/name", "plugin %q is enabled twice", e.Name)
		}
		enabled[e.Name] = true
		if e.Version != "" {
			if _, err := semver.NewConstraint(e.Version); err != nil {
				d.Errorf(l, ptr+"/version", "expected a version constraint such as \"^1.4\" or \">=2.0\", found %q", e.Version)
			}
		}
		c.checkValuesFrom(l, ptr, e.ValuesFrom)
		seenPool := map[string]bool{}
		for j, p := range e.NodePools {
			pp := ptr + "/nodePools/" + strconv.Itoa(j) + "/name"
			if !pools[p.Name] {
				d.Errorf(l, pp, "node pool %q is not in spec.nodePools", p.Name)
			}
			if seenPool[p.Name] {
				d.Errorf(l, pp, "duplicate node pool %q", p.Name)
			}
			seenPool[p.Name] = true
		}
	}
}

// checkValuesFrom: each entry reads a file or an environment variable, and a
// variable goes to a JSON pointer.
func (c *Cluster) checkValuesFrom(l *diag.List, ptr string, from []v1alpha1.ValuesSource) {
	d := c.doc
	for j, vf := range from {
		vp := ptr + "/valuesFrom/" + strconv.Itoa(j)
		switch {
		case (vf.File == "") == (vf.Env == ""):
			d.Errorf(l, vp, "expected exactly one of file and env")
		case vf.Env != "" && vf.Path == "":
			d.Errorf(l, vp, "env needs path, the JSON pointer where the variable's value goes (such as /clientSecret)")
		}
		if vf.Path != "" && (!strings.HasPrefix(vf.Path, "/") || vf.Path == "/") {
			d.Errorf(l, vp+"/path", "expected a JSON pointer such as /clientSecret, found %q", vf.Path)
		}
	}
}

// checkOrder: spec.plugins.order lists enabled plugins, each once.
func (c *Cluster) checkOrder(l *diag.List) {
	s := c.Spec.Spec
	if s.Plugins == nil {
		return
	}
	enabled := map[string]bool{}
	for _, e := range s.Plugins.Enabled {
		enabled[e.Name] = true
	}
	seen := map[string]bool{}
	for i, n := range s.Plugins.Order {
		ptr := "/spec/plugins/order/" + strconv.Itoa(i)
		if !plugin.NameRE.MatchString(n) || len(n) > 63 {
			c.doc.Errorf(l, ptr, "expected a plugin name (a DNS label: at most 63 lower-case letters, digits and '-'), found %q", n)
		}
		if seen[n] {
			c.doc.Errorf(l, ptr, "plugin %q is listed twice", n)
		}
		seen[n] = true
		if !enabled[n] {
			c.doc.Errorf(l, ptr, "plugin %q is not in spec.plugins.enabled", n)
		}
	}
}

// path resolves a path from the file relative to the file's directory.
func (c *Cluster) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.Dir, p)
}

// Sources returns the sources the file names: user directories (or package
// archives) resolved against its directory, and HTTP catalogs, whose downloads are
// cached in the user's cache directory.
func (c *Cluster) Sources() []source.Source {
	if c.Spec.Spec.Plugins == nil {
		return nil
	}
	var out []source.Source
	for _, s := range c.Spec.Spec.Plugins.Sources {
		switch {
		case s.Dir != "" && s.Verify != nil:
			dir := c.path(s.Dir)
			out = append(out, source.Verified(source.Path(plugin.OriginUser, dir), dir, source.TrustPolicy{Keys: c.paths(s.Verify.Keys), Required: s.Verify.Required}))
		case s.Dir != "":
			out = append(out, source.Path(plugin.OriginUser, c.path(s.Dir)))
		case s.Catalog != "":
			out = append(out, c.catalog(s))
		}
	}
	return out
}

// catalog is the source of a catalog entry: a kubeplug catalog (https:// or
// oci://), a Helm repository or an OCI registry of charts (type: helm), each
// reached and trusted as catalogOptions says.
func (c *Cluster) catalog(s v1alpha1.Source) source.Source {
	opts := c.catalogOptions(s)
	opts.Cache, opts.Pinned = source.DefaultCache(), c.pinned()
	switch {
	case s.Type == source.SourceTypeHelm && strings.HasPrefix(s.Catalog, oci.Scheme):
		return source.HelmOCIRepository(source.OriginCatalog, s.Catalog, opts)
	case s.Type == source.SourceTypeHelm:
		return source.HelmRepository(source.OriginCatalog, s.Catalog, opts)
	case s.Verify == nil:
		return source.OpenCatalog(source.OriginCatalog, s.Catalog, opts)
	}
	cat := source.OpenCatalog(source.OriginCatalog, s.Catalog, opts)
	return source.Verified(cat, s.Catalog, source.TrustPolicy{Keys: c.paths(s.Verify.Keys), Required: s.Verify.Required})
}

// catalogOptions is how to reach and trust the charts and packages of catalog
// source s: its CA file and registry credentials; for a Helm repository its
// provenance keyring; for an OCI registry of charts the cosign keys its charts
// are signed with (verify.keys of an oci:// source).
func (c *Cluster) catalogOptions(s v1alpha1.Source) source.HTTPOptions {
	var opts source.HTTPOptions
	if s.CAFile != "" {
		opts.CAFiles = []string{c.path(s.CAFile)}
	}
	if s.RegistryConfig != "" {
		opts.RegistryConfig = c.path(s.RegistryConfig)
	}
	switch v := s.Verify; {
	case v == nil:
	case v.Keyring != "":
		opts.Keyring, opts.ProvenanceRequired = c.path(v.Keyring), v.Required
	case strings.HasPrefix(s.Catalog, oci.Scheme) && len(v.Keys) > 0:
		opts.SignatureKeys, opts.SignatureRequired = c.paths(v.Keys), v.Required
	}
	return opts
}

// paths resolves paths from the file against its directory.
func (c *Cluster) paths(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = c.path(p)
	}
	return out
}

// pinned returns the digests the lock file beside the file pins for catalogs, so that
// a catalog that cannot be reached is listed from the cache; none without a lock
// file (a broken one is reported when plans check it).
func (c *Cluster) pinned() []string {
	if c.File == "" {
		return nil
	}
	lf, err := lock.Read(lock.PathFor(c.File))
	if err != nil || lf == nil {
		return nil
	}
	var out []string
	for _, e := range lf.Plugins {
		if e.Source == source.OriginCatalog.Name {
			out = append(out, e.Digest)
		}
	}
	return out
}

// Enabled returns the enabled plugins in file order.
func (c *Cluster) Enabled() []v1alpha1.PluginRef {
	if c.Spec.Spec.Plugins == nil {
		return nil
	}
	return c.Spec.Spec.Plugins.Enabled
}

// Errorf reports a problem located at a JSON pointer into the file.
func (c *Cluster) Errorf(l *diag.List, ptr, format string, args ...any) {
	ptr = c.filePtr(ptr)
	if c.doc == nil {
		l.Errorf(c.File, 0, 0, ptr, format, args...)
		return
	}
	c.doc.Errorf(l, ptr, format, args...)
}

// Warnf reports a warning located at a JSON pointer into the file.
func (c *Cluster) Warnf(l *diag.List, ptr, format string, args ...any) {
	ptr = c.filePtr(ptr)
	if c.doc == nil {
		l.Warnf(c.File, 0, 0, ptr, format, args...)
		return
	}
	c.doc.Warnf(l, ptr, format, args...)
}

// checkVerify checks a source's trust policy: a dir source, every key a public key
// that can be read.
// checkKeyring checks the trust policy of a type: helm source: a readable PGP
// keyring, and no kubeplug keys (charts are signed by provenance files).
func (c *Cluster) checkKeyring(l *diag.List, ptr string, src v1alpha1.Source) {
	if len(src.Verify.Keys) > 0 {
		c.doc.Errorf(l, ptr+"/verify/keys", "a Helm repository's charts are signed by provenance files (.prov): give a PGP keyring in keyring, not keys")
	}
	if src.Verify.Keyring == "" {
		c.doc.Errorf(l, ptr+"/verify/keyring", "expected the PGP keyring that signs the repository's provenance files (as helm verify --keyring takes it)")
		return
	}
	if _, err := source.LoadKeyring(c.path(src.Verify.Keyring)); err != nil {
		c.doc.Errorf(l, ptr+"/verify/keyring", "%v", err)
	}
}

func (c *Cluster) checkVerify(l *diag.List, ptr string, src v1alpha1.Source) {
	if src.Catalog != "" && !strings.HasPrefix(src.Catalog, "oci://") {
		c.doc.Errorf(l, ptr+"/verify", "verify is supported for dir and oci:// catalog sources only today, not HTTP catalogs")
		return
	}
	if len(src.Verify.Keys) == 0 {
		c.doc.Errorf(l, ptr+"/verify/keys", "expected at least one public key file (from kubeplug plugin keygen)")
	}
	for i, k := range src.Verify.Keys {
		kp := ptr + "/verify/keys/" + strconv.Itoa(i)
		b, err := bounded.ReadFile(c.path(k), bounded.MaxKeySize)
		if err != nil {
			c.doc.Errorf(l, kp, "cannot read the public key %s: %v", c.path(k), err)
			continue
		}
		if _, err := sign.LoadPublicKey(c.path(k), b); err != nil {
			c.doc.Errorf(l, kp, "%v", err)
		}
	}
}
