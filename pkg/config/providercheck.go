package config

import (
	"sync"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// ProviderProblem is one problem a provider finds in its own block of
// spec.provider.
type ProviderProblem struct {
	// Pointer is the JSON pointer below spec.provider.<name> ("/subnetIDs"), "" for
	// the block itself.
	Pointer string
	Message string
}

// ProviderCheck checks a provider's own block of spec.provider beyond its
// schema (fields that go together, counts). A provider registers one with
// RegisterProviderCheck, so that the cluster file's rules name its problems at
// their line while config knows nothing of any provider.
type ProviderCheck func(p *v1alpha1.Provider) []ProviderProblem

var providerChecks = struct {
	sync.RWMutex
	m map[string]ProviderCheck
}{m: map[string]ProviderCheck{}}

// RegisterProviderCheck makes check the rules of the provider called name (its
// field in spec.provider). Providers register in an init function; registering
// a name twice panics, as it is a programming error.
func RegisterProviderCheck(name string, check ProviderCheck) {
	providerChecks.Lock()
	defer providerChecks.Unlock()
	if _, dup := providerChecks.m[name]; dup {
		panic("config: provider check " + name + " registered twice")
	}
	providerChecks.m[name] = check
}
