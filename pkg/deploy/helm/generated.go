package helm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	ri "helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeplug/kubeplug/pkg/deploy/kube"
	"github.com/kubeplug/kubeplug/pkg/deploy/seal"
)

// Generators are the template functions whose output is random: Sprig's key,
// certificate and random-string generators, as Helm gives them to templates.
// render shows each call as a token; Install keeps what each call generated in
// the release's generated record, so an upgrade gives the same values again.
var Generators = []string{
	"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey",
	"genSignedCert", "genSignedCertWithKey", "randAlphaNum", "randAlpha", "randNumeric",
	"randAscii", "randBytes", "uuidv4", "htpasswd", "encryptAES",
}

// GeneratedSecretPrefix starts the name of the Secret, in a release's namespace,
// that keeps what the release's templates generated (GeneratedSecretPrefix+NAME),
// sealed; GeneratedType is its type.
const (
	GeneratedSecretPrefix = "kubeplug.generated.v1."
	GeneratedType         = corev1.SecretType("kubeplug.dev/helm-generated.v1")
	generatedField        = "generated"
)

// generated hands a release's templates the values its installed revisions
// generated, and generates (with Sprig's own functions) only what no revision
// did. A call is known by its function, a digest of its arguments and how many
// calls with the same function and arguments came before it in Helm's (fixed)
// template order: so genCA "ca" 365 in a chart gives the same CA on every
// upgrade, whatever else changed, and genSignedCert given that CA the same
// certificate; a call with other arguments (another CN, another length) is
// another value. Values are never dropped from the record while the release
// exists, so a rollback to an older revision and a later upgrade still agree.
type generated struct {
	release kube.ReleaseRef

	mu     sync.Mutex
	values map[string]string // "KEY" (a string) or "KEY.cert"/"KEY.key" (a certificate)
	calls  map[string]int
	fresh  bool // values holds something no stored record has
	sealer *seal.Sealer
}

// funcs returns the template functions of the generators, over Sprig's.
func (g *generated) funcs() template.FuncMap {
	real := sprig.TxtFuncMap()
	out := template.FuncMap{}
	for _, name := range Generators {
		fn := reflect.ValueOf(real[name])
		if !fn.IsValid() {
			continue
		}
		out[name] = reflect.MakeFunc(fn.Type(), func(args []reflect.Value) []reflect.Value {
			return g.call(name, fn, args)
		}).Interface()
	}
	return out
}

// call returns what the generator name gave this call before, or calls fn and
// keeps its result.
func (g *generated) call(name string, fn reflect.Value, args []reflect.Value) []reflect.Value {
	key := g.key(name, args)
	typ := fn.Type()
	ret := typ.Out(0)
	g.mu.Lock()
	defer g.mu.Unlock()
	if out, ok := g.known(key, typ); ok {
		return out
	}
	var res []reflect.Value
	if typ.IsVariadic() {
		res = fn.CallSlice(args)
	} else {
		res = fn.Call(args)
	}
	if len(res) == 2 && !res[1].IsNil() {
		return res // an error: nothing to keep
	}
	var made []string
	if ret.Kind() == reflect.String {
		g.values[key] = res[0].String()
		made = append(made, res[0].String())
	} else {
		cert, k := res[0].FieldByName("Cert").String(), res[0].FieldByName("Key").String()
		g.values[key+".cert"], g.values[key+".key"] = cert, k
		made = append(made, cert, k)
	}
	g.fresh = true
	g.sensitive(made...)
	return res
}

// known returns the values a kept call gives, in fn's result types.
func (g *generated) known(key string, typ reflect.Type) ([]reflect.Value, bool) {
	ret := typ.Out(0)
	var v reflect.Value
	if ret.Kind() == reflect.String {
		s, ok := g.values[key]
		if !ok {
			return nil, false
		}
		v = reflect.ValueOf(s).Convert(ret)
	} else {
		cert, ok1 := g.values[key+".cert"]
		k, ok2 := g.values[key+".key"]
		if !ok1 || !ok2 {
			return nil, false
		}
		v = reflect.New(ret).Elem()
		v.FieldByName("Cert").SetString(cert)
		v.FieldByName("Key").SetString(k)
	}
	out := []reflect.Value{v}
	if typ.NumOut() == 2 {
		out = append(out, reflect.Zero(typ.Out(1)))
	}
	return out, true
}

// key names one call: the function, a digest of its arguments (which may hold
// a key: genSignedCert's CA), and the count of earlier calls with both.
func (g *generated) key(name string, args []reflect.Value) string {
	vals := make([]any, len(args))
	for i, a := range args {
		vals[i] = a.Interface()
	}
	raw, _ := json.Marshal(vals) // strings, numbers, lists and certificates
	sum := sha256.Sum256(append([]byte(name+"\x00"), raw...))
	base := name + "-" + hex.EncodeToString(sum[:8])
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls[base]++
	return fmt.Sprintf("%s-%d", base, g.calls[base])
}

// sensitive adds generated values to the values sealed in every record and
// masked in output: each whole, and each line of a multi-line one (a PEM block
// a template indents is still sealed line by line).
func (g *generated) sensitive(vals ...string) {
	set := g.sealer.Sensitive()
	for _, v := range vals {
		set.Add(v)
		if strings.Contains(v, "\n") {
			for line := range strings.Lines(v) {
				if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") {
					set.Add(line)
				}
			}
		}
	}
}

// loadGenerated reads the release's generated record; none when the release
// never generated anything or there is no Sealer (then nothing is kept, as with
// Helm: an upgrade generates anew).
func (m *Manager) loadGenerated(ctx context.Context, ref kube.ReleaseRef) (*generated, error) {
	if m.opts.Sealer == nil {
		return nil, nil
	}
	g := &generated{release: ref, values: map[string]string{}, calls: map[string]int{}, sealer: m.opts.Sealer}
	var sec *corev1.Secret
	err := m.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		sec, err = m.c.Core.CoreV1().Secrets(ref.Namespace).Get(ctx, GeneratedSecretPrefix+ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			sec, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the generated values of Helm release %s: %w", ref, err)
	}
	if sec == nil {
		return g, nil
	}
	raw, err := m.opts.Sealer.Unseal(ctx, sec.Data[generatedField])
	if err != nil {
		return nil, fmt.Errorf("read the generated values of Helm release %s (Secret %s/%s): %w", ref, ref.Namespace, sec.Name, err)
	}
	if err := json.Unmarshal(raw, &g.values); err != nil {
		return nil, fmt.Errorf("read the generated values of Helm release %s (Secret %s/%s): %w", ref, ref.Namespace, sec.Name, err)
	}
	vals := make([]string, 0, len(g.values))
	for _, v := range g.values {
		vals = append(vals, v)
	}
	g.sensitive(vals...)
	return g, nil
}

// save writes the generated record, sealed, when this render generated
// something new.
func (m *Manager) saveGenerated(ctx context.Context, g *generated) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.fresh {
		return nil
	}
	raw, err := json.Marshal(g.values)
	if err != nil {
		return err
	}
	sealed, err := m.opts.Sealer.Seal(ctx, raw)
	if err != nil {
		return fmt.Errorf("seal the generated values of Helm release %s: %w", g.release, err)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: GeneratedSecretPrefix + g.release.Name, Namespace: g.release.Namespace,
			Labels: map[string]string{kube.LabelManagedBy: kube.FieldManager, "name": g.release.Name},
		},
		Type: GeneratedType, Data: map[string][]byte{generatedField: sealed},
	}
	err = m.c.Retry(ctx, func(ctx context.Context) error {
		if err := m.c.EnsureNamespace(ctx, g.release.Namespace); err != nil {
			return err
		}
		secrets := m.c.Core.CoreV1().Secrets(g.release.Namespace)
		_, err := secrets.Create(ctx, sec, metav1.CreateOptions{FieldManager: kube.FieldManager})
		if apierrors.IsAlreadyExists(err) {
			_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{FieldManager: kube.FieldManager})
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("keep the generated values of Helm release %s in Secret %s/%s: %w", g.release, g.release.Namespace, sec.Name, err)
	}
	g.fresh = false
	return nil
}

// deleteGenerated removes the release's generated record, with the release.
func (m *Manager) deleteGenerated(ctx context.Context, ref kube.ReleaseRef) error {
	err := m.c.Retry(ctx, func(ctx context.Context) error {
		err := m.c.Core.CoreV1().Secrets(ref.Namespace).Delete(ctx, GeneratedSecretPrefix+ref.Name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete the generated values of Helm release %s: %w", ref, err)
	}
	return nil
}

// generatedDriver writes the generated record when Helm stores a new revision
// (pending, after rendering, before it touches any object): a record that
// cannot be written fails the install or upgrade before anything changed.
type generatedDriver struct {
	driver.Driver
	save func() error
}

func (d generatedDriver) Create(key string, rls ri.Releaser) error {
	if err := d.save(); err != nil {
		return err
	}
	return d.Driver.Create(key, rls)
}
