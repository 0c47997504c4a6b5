package controller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	ctrlv1 "github.com/kubeplug/kubeplug/api/controller/v1alpha1"
	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/config"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/source"
	"github.com/kubeplug/kubeplug/pkg/values"
)

// specError is a problem with what an installation asks for (a value that does
// not fit a schema, a missing Secret): retrying does not help until someone
// edits something, so the installation is Stalled.
type specError struct{ msg string }

func (e *specError) Error() string { return e.msg }

func specErrorf(format string, args ...any) error {
	return &specError{msg: fmt.Sprintf(format, args...)}
}

// built is an installation turned into what `kubeplug apply` takes.
type built struct {
	// raw is the cluster file; cluster is it parsed (load).
	raw     []byte
	cluster *config.Cluster
	// file is the in-memory cluster file's path (never written): diagnostics
	// located in it are reported at the installation's fields.
	file string
	// digest identifies the cluster file (values, sources and their versions,
	// the Kubernetes version) and the target.
	digest string
	// unpack writes the packages and keys its sources name, held in
	// ConfigMaps and Secrets, under the work directory: only an apply needs
	// them, not a reconcile that finds nothing changed (digest).
	unpack unpacks
	// passing is what the installation passes of its spec.expansions.
	passing *passing
}

// unpacks write what sources name; see Controller.unpack.
type unpacks []func() error

// load unpacks what the cluster file's sources name and parses it (which
// checks that they exist): only an apply needs it.
func (b *built) load() error {
	if err := b.unpack.do(); err != nil {
		return fmt.Errorf("unpack the catalogs' packages: %w", err)
	}
	parsed, l := config.Parse(b.file, b.raw)
	if l.HasFatal() {
		return &specError{msg: describe(l, b.file)}
	}
	b.cluster = parsed
	return nil
}

func (u unpacks) do() error {
	for _, f := range u {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// build turns an installation into a cluster file for the target's version: its
// catalogs as sources (ConfigMap- and Secret-held packages unpacked under the
// work directory), its plugins with their valuesFrom resolved.
func (c *Controller) build(ctx context.Context, cl client.Client, obj client.Object, spec *ctrlv1.PluginInstallationSpec, tg *target, version string) (*built, error) {
	var sources []v1alpha1.Source
	var pending unpacks
	for _, name := range spec.Catalogs {
		srcs, u, err := c.catalogSources(ctx, cl, obj.GetNamespace(), name)
		if err != nil {
			return nil, err
		}
		sources, pending = append(sources, srcs...), append(pending, u...)
	}
	passing, u, err := c.passingOf(ctx, cl, obj.GetNamespace(), spec, tg)
	if err != nil {
		return nil, err
	}
	pending = append(pending, u...)
	enabled := make([]v1alpha1.PluginRef, 0, len(spec.Plugins))
	for i, p := range spec.Plugins {
		vals := values.DeepCopy(p.Values)
		if vals == nil {
			vals = map[string]any{}
		}
		for j, vf := range p.ValuesFrom {
			field := fmt.Sprintf("spec.plugins[%d].valuesFrom[%d]", i, j)
			if err := c.valueFrom(ctx, cl, obj.GetNamespace(), tg, vf, vals, field); err != nil {
				return nil, err
			}
		}
		enabled = append(enabled, v1alpha1.PluginRef{Name: p.Name, Version: p.Version, Values: vals})
	}
	doc := map[string]any{
		"apiVersion": "kubeplug.dev/v1alpha1",
		"kind":       "Cluster",
		"metadata":   map[string]any{"name": obj.GetName()},
		"spec": map[string]any{
			"kubernetesVersion": version,
			"plugins":           map[string]any{"sources": sources, "enabled": enabled},
		},
	}
	raw, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	// The file is never written, nor its directory made: its sources are
	// absolute paths, and nothing of an apply writes beside its cluster file.
	file := filepath.Join(c.opts.WorkDir, "installations", obj.GetNamespace(), obj.GetName(), "cluster.yaml")
	// Not the work directory's path, which differs per process: a restarted
	// controller sees the same digest for the same inputs.
	stable := bytes.ReplaceAll(raw, []byte(c.opts.WorkDir), []byte("$WORKDIR"))
	sum := sha256.Sum256(append(stable, "\x00target="+tg.key+"\x00expansions="+passing.stamp...))
	return &built{raw: raw, file: file, digest: "sha256:" + hex.EncodeToString(sum[:]), unpack: pending, passing: passing}, nil
}

// valueFrom merges one valuesFrom entry into vals: the key of a Secret or a
// ConfigMap (a YAML map of values, or one string at path), or a field of the
// target cluster at path.
func (c *Controller) valueFrom(ctx context.Context, cl client.Client, ns string, tg *target, vf ctrlv1.InstallationValuesSource, vals map[string]any, field string) error {
	switch {
	case vf.SecretKeyRef != nil || vf.ConfigMapKeyRef != nil:
		text, found, err := keyRefText(ctx, cl, ns, vf, field)
		if err != nil || !found {
			return err
		}
		return mergeValueText(vals, vf.Path, text, field)
	case vf.TargetField != "":
		return targetFieldValue(tg, vf, vals, field)
	default:
		return specErrorf("%s: set one of secretKeyRef, configMapKeyRef and targetField", field)
	}
}

// keyRefText reads the key a valuesFrom entry's secretKeyRef (or else its
// configMapKeyRef) names; a missing object or key is refused unless the entry
// is optional, then found is false.
func keyRefText(ctx context.Context, cl client.Client, ns string, vf ctrlv1.InstallationValuesSource, field string) (text string, found bool, err error) {
	if ref := vf.SecretKeyRef; ref != nil {
		sec := &corev1.Secret{}
		err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, sec)
		if err != nil && !apierrors.IsNotFound(err) {
			return "", false, err
		}
		if err == nil {
			var b []byte
			b, found = sec.Data[ref.Key]
			text = string(b)
		}
		if !found && !vf.Optional {
			return "", false, specErrorf("%s.secretKeyRef: Secret %s/%s has no key %q", field, ns, ref.Name, ref.Key)
		}
		return text, found, nil
	}
	ref := vf.ConfigMapKeyRef
	cm := &corev1.ConfigMap{}
	err = cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, cm)
	if err != nil && !apierrors.IsNotFound(err) {
		return "", false, err
	}
	if err == nil {
		text, found = cm.Data[ref.Key]
	}
	if !found && !vf.Optional {
		return "", false, specErrorf("%s.configMapKeyRef: ConfigMap %s/%s has no key %q", field, ns, ref.Name, ref.Key)
	}
	return text, found, nil
}

// targetFieldValue sets the target cluster's field a valuesFrom entry names
// at its path in vals; a missing field is refused unless the entry is
// optional.
func targetFieldValue(tg *target, vf ctrlv1.InstallationValuesSource, vals map[string]any, field string) error {
	if tg.object == nil {
		return specErrorf("%s.targetField: the installation has no target cluster to read %s from", field, vf.TargetField)
	}
	v, ok := values.Get(targetFields(tg.object), vf.TargetField)
	if !ok {
		if vf.Optional {
			return nil
		}
		return specErrorf("%s.targetField: TargetCluster %s has no field %s", field, tg.key, vf.TargetField)
	}
	if err := values.Set(vals, vf.Path, v); err != nil {
		return specErrorf("%s.path: %v", field, err)
	}
	return nil
}

// mergeValueText merges the text of a key into vals: as one string at path
// when path is set, else as a YAML map of values.
func mergeValueText(vals map[string]any, path, text, field string) error {
	if path != "" {
		if err := values.Set(vals, path, text); err != nil {
			return specErrorf("%s.path: %v", field, err)
		}
		return nil
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(text), &m); err != nil {
		return specErrorf("%s: the key is not a YAML map of values (set path to use it as one string): %v", field, err)
	}
	merged := values.Merge(vals, m)
	clear(vals)
	for k, v := range merged {
		vals[k] = v
	}
	return nil
}

// catalogSources turns a PluginCatalog into cluster-file sources; the files
// they name exist once the unpacks returned ran.
func (c *Controller) catalogSources(ctx context.Context, cl client.Client, ns, name string) ([]v1alpha1.Source, unpacks, error) {
	obj := &ctrlv1.PluginCatalog{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, specErrorf("spec.catalogs: PluginCatalog %s/%s does not exist", ns, name)
		}
		return nil, nil, err
	}
	var out []v1alpha1.Source
	var pending unpacks
	for i, s := range obj.Spec.Sources {
		where := fmt.Sprintf("PluginCatalog %s/%s spec.sources[%d]", ns, name, i)
		srcs, u, err := c.catalogSource(ctx, cl, ns, where, s)
		if err != nil {
			return nil, nil, err
		}
		out, pending = append(out, srcs...), append(pending, u...)
	}
	return out, pending, nil
}

// catalogSource turns one source of a PluginCatalog (at where) into
// cluster-file sources: its URL, or the package archives its ConfigMap or
// Secret holds, verified with the keys of its verifyKeys ConfigMap.
func (c *Controller) catalogSource(ctx context.Context, cl client.Client, ns, where string, s ctrlv1.CatalogSource) ([]v1alpha1.Source, unpacks, error) {
	var pending unpacks
	var verify *v1alpha1.SourceVerify
	if s.VerifyKeys != "" {
		keys, u, err := c.verifyKeys(ctx, cl, ns, where, s.VerifyKeys)
		if err != nil {
			return nil, nil, err
		}
		pending = append(pending, u)
		verify = &v1alpha1.SourceVerify{Keys: keys, Required: true}
	}
	switch {
	case s.Type != "" && s.URL == "":
		return nil, nil, specErrorf("%s.type: %q applies to a url; this source has none", where, s.Type)
	case s.Type == source.SourceTypeHelm && s.VerifyKeys != "" && !strings.HasPrefix(s.URL, "oci://"):
		return nil, nil, specErrorf("%s.verifyKeys: a Helm repository's charts are not signed with kubeplug keys; leave verifyKeys out for an https:// type: helm source (an oci:// one takes the cosign keys of its charts)", where)
	case s.URL != "":
		return []v1alpha1.Source{{Catalog: s.URL, Type: s.Type, Verify: verify}}, pending, nil
	case s.ConfigMap != "" || s.Secret != "":
		out, u, err := c.archiveSources(ctx, cl, ns, where, s, verify)
		if err != nil {
			return nil, nil, err
		}
		return out, append(pending, u), nil
	}
	return nil, pending, nil
}

// archiveSources are the package archives (keys ending in .tgz) of the
// ConfigMap or Secret a catalog source names, as directory sources verified
// as verify says, once the unpack returned ran; one holding none is refused.
func (c *Controller) archiveSources(ctx context.Context, cl client.Client, ns, where string, s ctrlv1.CatalogSource, verify *v1alpha1.SourceVerify) ([]v1alpha1.Source, func() error, error) {
	data, version, kind, holder, err := catalogData(ctx, cl, ns, where, s)
	if err != nil {
		return nil, nil, err
	}
	files, u := c.unpack(filepath.Join("catalogs", ns, kind+"-"+holder+"@"+version), nil, data)
	var out []v1alpha1.Source
	for _, f := range files {
		if strings.HasSuffix(f, ".tgz") || strings.HasSuffix(f, ".tar.gz") {
			out = append(out, v1alpha1.Source{Dir: f, Verify: verify})
		}
	}
	if len(out) == 0 {
		return nil, nil, specErrorf("%s: %s %s holds no package archive (a key ending in .tgz)", where, map[string]string{"cm": "ConfigMap", "secret": "Secret"}[kind], holder)
	}
	return out, u, nil
}

// verifyKeys are the key files of a catalog source's verifyKeys ConfigMap
// name, once the unpack returned ran; a ConfigMap missing or holding no keys
// is refused.
func (c *Controller) verifyKeys(ctx context.Context, cl client.Client, ns, where, name string) ([]string, func() error, error) {
	cm := &corev1.ConfigMap{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, specErrorf("%s.verifyKeys: ConfigMap %s does not exist", where, name)
		}
		return nil, nil, err
	}
	files, u := c.unpack(filepath.Join("keys", ns, cm.Name+"@"+cm.ResourceVersion), textData(cm.Data), cm.BinaryData)
	if len(files) == 0 {
		return nil, u, specErrorf("%s.verifyKeys: ConfigMap %s holds no keys", where, name)
	}
	return files, u, nil
}

// catalogData reads the ConfigMap (or else the Secret) a catalog source
// names: its data, resource version, kind ("cm" or "secret") and name.
func catalogData(ctx context.Context, cl client.Client, ns, where string, s ctrlv1.CatalogSource) (data map[string][]byte, version, kind, holder string, err error) {
	if s.ConfigMap != "" {
		cm := &corev1.ConfigMap{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: s.ConfigMap}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, "", "", "", specErrorf("%s.configMap: ConfigMap %s does not exist", where, s.ConfigMap)
			}
			return nil, "", "", "", err
		}
		return mergeData(textData(cm.Data), cm.BinaryData), cm.ResourceVersion, "cm", cm.Name, nil
	}
	sec := &corev1.Secret{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: s.Secret}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", "", "", specErrorf("%s.secret: Secret %s does not exist", where, s.Secret)
		}
		return nil, "", "", "", err
	}
	return sec.Data, sec.ResourceVersion, "secret", sec.Name, nil
}

// targetFields is a TargetCluster as the JSON object that targetField
// pointers read (apiVersion, kind, metadata, spec, status); empty when it
// cannot be converted.
func targetFields(tc *ctrlv1.TargetCluster) map[string]any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tc)
	if err != nil {
		return nil
	}
	u["apiVersion"], u["kind"] = ctrlv1.GroupVersion.String(), "TargetCluster" // empty in what the cache holds
	return u
}

var keyRE = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// unpack returns the paths, sorted, of data's files under the work directory
// at rel, and the function that writes them there, once per version (rel names
// it).
func (c *Controller) unpack(rel string, text map[string][]byte, bin map[string][]byte) ([]string, func() error) {
	dir := filepath.Join(c.opts.WorkDir, rel)
	all := mergeData(text, bin)
	names := make([]string, 0, len(all))
	for k := range all {
		if !keyRE.MatchString(k) || k == "." || k == ".." {
			continue
		}
		names = append(names, k)
	}
	slices.Sort(names)
	var out []string
	for _, k := range names {
		out = append(out, filepath.Join(dir, k))
	}
	return out, func() error { return writeOnce(dir, names, all) }
}

// writeOnce writes the files names of all into dir, unless a complete dir is
// there already; readers never see it half-written.
func writeOnce(dir string, names []string, all map[string][]byte) error {
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	// Its own: reconciles of one process may unpack the same version at once.
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	for _, k := range names {
		if err := os.WriteFile(filepath.Join(tmp, k), all[k], 0o600); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		if _, serr := os.Stat(filepath.Join(dir, ".complete")); serr == nil {
			return nil // another reconcile unpacked the same version
		}
		return err
	}
	return nil
}

func textData(m map[string]string) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}

func mergeData(a, b map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// fieldRE finds the cluster file's plugin list in a diagnostic's field.
var fieldRE = regexp.MustCompile(`spec\.plugins\.enabled\[(\d+)\]`)

// describe renders diagnostics as the CLI prints them, with the in-memory
// cluster file's locations as the installation's fields.
func describe(l diag.List, file string) string {
	var lines []string
	for _, d := range l.Fatal() {
		if d.File == file {
			d.File, d.Line, d.Column = "", 0, 0
		}
		d.Field = fieldRE.ReplaceAllString(d.Field, "spec.plugins[$1]")
		d.Message = fieldRE.ReplaceAllString(d.Message, "spec.plugins[$1]")
		lines = append(lines, strings.ReplaceAll(d.String(), file, "the installation"))
	}
	return strings.Join(lines, "\n")
}
