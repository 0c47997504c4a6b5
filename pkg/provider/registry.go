package provider

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/render"
	"github.com/kubeplug/kubeplug/pkg/stage"
)

// DefaultName is the provider of a cluster whose spec names none.
const DefaultName = v1alpha1.DefaultProvider

// Config is what a Factory gets to make the provider of one cluster.
type Config struct {
	// ClusterName names the cluster (cluster.yaml's metadata.name).
	ClusterName string
	// Spec is the cluster's spec.provider; nil when it names none. A factory reads
	// its own field (spec.provider.local for the local provider).
	Spec *v1alpha1.Provider
	// StateDir is where a provider that keeps state on this machine keeps the
	// cluster's; empty means the provider's default.
	StateDir string
	// Events receives progress; none when nil.
	Events func(Event)
	// Logger receives diagnostics; discarded when nil.
	Logger *slog.Logger
	// Options are settings of one provider that a caller gives beside the
	// cluster's spec (a CLI flag): each a type of the provider that reads it
	// (local.BuildFromSource). One of another provider than the cluster's is
	// an error, never ignored.
	Options []Option
}

// Option is a setting typed by the provider that takes it.
type Option interface {
	// Provider is the name of the provider that takes it.
	Provider() string
	// String says what it is, for an error (a flag's name).
	String() string
}

// Factory makes the provider of one cluster. It checks cfg and starts nothing.
type Factory func(cfg Config) (Provider, error)

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// Register makes a provider known under name, the key of its field in a cluster's
// spec.provider. Providers register themselves in an init function; registering
// a name twice panics, as it is a programming error.
func Register(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := factories[name]; dup {
		panic(fmt.Sprintf("provider: %s registered twice", name))
	}
	factories[name] = f
}

// Names returns the registered providers' names, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Sorted(maps.Keys(factories))
}

// NameOf returns the name of the provider spec selects: the one field it sets,
// DefaultName when spec is nil or sets none.
func NameOf(spec *v1alpha1.Provider) (string, error) {
	return v1alpha1.ProviderName(spec)
}

// New makes the provider cfg.Spec selects with the registered factory. An
// unknown provider is an error naming the known ones.
func New(cfg Config) (Provider, error) {
	name, err := NameOf(cfg.Spec)
	if err != nil {
		return nil, err
	}
	mu.RLock()
	f := factories[name]
	mu.RUnlock()
	if f == nil {
		return nil, fmt.Errorf("unknown provider %q: this kubeplug knows %s", name, strings.Join(Names(), ", "))
	}
	for _, o := range cfg.Options {
		if o.Provider() != name {
			return nil, fmt.Errorf("%s is a setting of the %s provider, and this cluster's provider is %s", o, o.Provider(), name)
		}
	}
	p, err := f(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s provider: %w", name, err)
	}
	return p, nil
}

var cloudTemplate render.CloudTemplate

// RegisterCloudTemplate makes t the cloud template render builds
// (cloud/template.json). The aws provider registers its CloudFormation template in
// an init function; registering a second panics, as it is a programming error.
func RegisterCloudTemplate(t render.CloudTemplate) {
	mu.Lock()
	defer mu.Unlock()
	if cloudTemplate != nil {
		panic("provider: a cloud template is registered twice")
	}
	cloudTemplate = t
}

// CloudTemplateOf is the registered cloud template, nil when the program links
// none (render then renders no cloud/template.json).
func CloudTemplateOf() render.CloudTemplate {
	mu.RLock()
	defer mu.RUnlock()
	return cloudTemplate
}

// SpecRender is what a provider gives render from the cluster file alone, so
// that render shows what its machines boot, as up does.
type SpecRender struct {
	// Facts are the control-plane machine's facts (FactSource), for a
	// provider whose facts follow from the cluster file (the aws provider's,
	// whose machines learn their addresses at boot). Nil for a provider whose
	// facts depend on what runs (the local provider's ports).
	Facts func(spec *v1alpha1.Provider) map[string]any
	// BootSecrets is the URL each machine of pool fetches the provider's
	// part of its boot from (render.Input.BootSecrets); nil when the provider
	// delivers it otherwise.
	BootSecrets func(clusterName string, spec *v1alpha1.Provider, pool string) string
}

var specRenders = map[string]SpecRender{}

// RegisterSpecRender makes r what render gets from the provider name.
// Registering a name twice panics, as it is a programming error.
func RegisterSpecRender(name string, r SpecRender) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := specRenders[name]; dup {
		panic(fmt.Sprintf("provider: render hooks of %s registered twice", name))
	}
	specRenders[name] = r
}

// SpecRenderOf returns what the provider spec selects registered with
// RegisterSpecRender; the zero SpecRender when it registered nothing.
func SpecRenderOf(spec *v1alpha1.Provider) SpecRender {
	name, err := NameOf(spec)
	if err != nil {
		return SpecRender{}
	}
	mu.RLock()
	defer mu.RUnlock()
	return specRenders[name]
}

// ClusterFacts completes a cluster's facts with what its provider knows, as
// engine.ProviderFacts: values returns a planned plugin's values (nil when
// the cluster does not run it). It starts nothing and must not block.
type ClusterFacts func(cl *v1alpha1.Cluster, values func(plugin string) map[string]any, f *stage.Facts)

var clusterFacts = map[string]ClusterFacts{}

// RegisterFacts makes f the facts of the provider called name; providers
// register theirs in an init function. Registering twice panics.
func RegisterFacts(name string, f ClusterFacts) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := clusterFacts[name]; dup {
		panic(fmt.Sprintf("provider: facts of %s registered twice", name))
	}
	clusterFacts[name] = f
}

// FactsOf completes a cluster's facts through the facts its provider
// registered; a provider that registered none adds nothing.
func FactsOf(cl *v1alpha1.Cluster, values func(plugin string) map[string]any, f *stage.Facts) {
	if cl == nil {
		return
	}
	name, err := v1alpha1.ProviderName(cl.Spec.Provider)
	if err != nil {
		return
	}
	mu.RLock()
	fn := clusterFacts[name]
	mu.RUnlock()
	if fn != nil {
		fn(cl, values, f)
	}
}

// ControlPlaneEndpoint is the API endpoint the control-plane plugin's
// "machine" value describes (https://ADDRESS:PORT), for providers whose
// control plane runs with that plugin's flags; empty without it.
func ControlPlaneEndpoint(values func(plugin string) map[string]any) string {
	m, _ := values("control-plane")["machine"].(map[string]any)
	addr, _ := m["address"].(string)
	ports, _ := m["ports"].(map[string]any)
	if addr == "" || ports["apiServer"] == nil {
		return ""
	}
	return fmt.Sprintf("https://%s", net.JoinHostPort(addr, fmt.Sprint(ports["apiServer"])))
}
