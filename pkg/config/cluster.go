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

func (c *Cluster) check(l *diag.List) {
	d, s := c.doc, c.Spec.Spec
	v, err := semver.StrictNewVersion(s.KubernetesVersion)
	if err != nil {
		d.Errorf(l, "/spec/kubernetesVersion", "expected a Kubernetes version such as 1.36.3, found %q", s.KubernetesVersion)
	}
	c.KubernetesVersion = v
	if pr := s.Provider; pr != nil {
		set := 0
		for _, p := range []bool{pr.Local != nil, pr.AWS != nil, pr.Hosts != nil} {
			if p {
				set++
			}
		}
		switch {
		case set != 1:
			d.Errorf(l, "/spec/provider", "expected one provider, such as local: {}")
		case pr.AWS != nil && (pr.AWS.VPCID == "") != (len(pr.AWS.SubnetIDs) == 0):
			d.Errorf(l, "/spec/provider/aws", "expected vpcID and subnetIDs together (an existing VPC) or neither (a new one)")
		case pr.AWS != nil && pr.AWS.VPCID != "" && len(pr.AWS.SubnetIDs) < 2:
			d.Errorf(l, "/spec/provider/aws/subnetIDs", "expected at least two subnets, in different availability zones, for the API server's load balancer")
		}
	}
	pools := map[string]bool{}
	for i, p := range s.NodePools {
		if pools[p.Name] {
			d.Errorf(l, "/spec/nodePools/"+strconv.Itoa(i)+"/name", "duplicate node pool %q", p.Name)
		}
		if p.Name == model.ControlPlanePool {
			d.Errorf(l, "/spec/nodePools/"+strconv.Itoa(i)+"/name", "the pool name %q is reserved for the control-plane machines (see spec.controlPlane)", p.Name)
		}
		pools[p.Name] = true
	}
	if s.Plugins == nil {
		return
	}
	for i, src := range s.Plugins.Sources {
		ptr := "/spec/plugins/sources/" + strconv.Itoa(i)
		switch {
		case (src.Dir == "") == (src.Catalog == ""):
			d.Errorf(l, ptr, "expected exactly one of dir and catalog")
		case src.Catalog != "":
			if err := source.CheckCatalogURL(src.Catalog); err != nil {
				d.Errorf(l, ptr+"/catalog", "%v", err)
			} else if src.Type == source.SourceTypeHelm && strings.HasPrefix(src.Catalog, oci.Scheme) {
				d.Errorf(l, ptr+"/catalog", "a type: helm source is a Helm chart repository's https:// URL; charts in OCI registries are not listed yet")
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
		switch {
		case src.Type != "" && src.Type != source.SourceTypeHelm:
			d.Errorf(l, ptr+"/type", "expected type helm (a Helm chart repository) or none (a kubeplug catalog), found %q", src.Type)
		case src.Type != "" && src.Catalog == "":
			d.Errorf(l, ptr+"/type", "type is for catalog sources; a dir source holds plugin packages")
		case src.Type == source.SourceTypeHelm && src.Verify != nil:
			c.checkKeyring(l, ptr, src)
		case src.Verify != nil && src.Verify.Keyring != "":
			d.Errorf(l, ptr+"/verify/keyring", "keyring (a PGP keyring for Helm provenance files) is for type: helm sources")
		case src.Verify != nil:
			c.checkVerify(l, ptr, src)
		}
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
		for j, vf := range e.ValuesFrom {
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
	seen := map[string]bool{}
	for i, n := range s.Plugins.Order {
		ptr := "/spec/plugins/order/" + strconv.Itoa(i)
		if !plugin.NameRE.MatchString(n) || len(n) > 63 {
			d.Errorf(l, ptr, "expected a plugin name (a DNS label: at most 63 lower-case letters, digits and '-'), found %q", n)
		}
		if seen[n] {
			d.Errorf(l, ptr, "plugin %q is listed twice", n)
		}
		seen[n] = true
		if !enabled[n] {
			d.Errorf(l, ptr, "plugin %q is not in spec.plugins.enabled", n)
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
			keys := make([]string, len(s.Verify.Keys))
			for i, k := range s.Verify.Keys {
				keys[i] = c.path(k)
			}
			dir := c.path(s.Dir)
			out = append(out, source.Verified(source.Path(plugin.OriginUser, dir), dir, source.TrustPolicy{Keys: keys, Required: s.Verify.Required}))
		case s.Dir != "":
			out = append(out, source.Path(plugin.OriginUser, c.path(s.Dir)))
		case s.Catalog != "":
			opts := source.HTTPOptions{Cache: source.DefaultCache(), Pinned: c.pinned()}
			if s.CAFile != "" {
				opts.CAFiles = []string{c.path(s.CAFile)}
			}
			if s.RegistryConfig != "" {
				opts.RegistryConfig = c.path(s.RegistryConfig)
			}
			if s.Type == source.SourceTypeHelm {
				if s.Verify != nil && s.Verify.Keyring != "" {
					opts.Keyring, opts.ProvenanceRequired = c.path(s.Verify.Keyring), s.Verify.Required
				}
				out = append(out, source.HelmRepository(source.OriginCatalog, s.Catalog, opts))
				continue
			}
			cat := source.OpenCatalog(source.OriginCatalog, s.Catalog, opts)
			if s.Verify == nil {
				out = append(out, cat)
				continue
			}
			keys := make([]string, len(s.Verify.Keys))
			for i, k := range s.Verify.Keys {
				keys[i] = c.path(k)
			}
			out = append(out, source.Verified(cat, s.Catalog, source.TrustPolicy{Keys: keys, Required: s.Verify.Required}))
		}
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
