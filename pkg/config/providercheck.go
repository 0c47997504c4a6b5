package config

import (
	"sync"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
)

// ProviderProblem is one problem a provider finds in a cluster's spec.
type ProviderProblem struct {
	// Pointer is the JSON pointer below spec ("/provider/aws/subnetIDs",
	// "/nodePools/0/minSize").
	Pointer string
	Message string
}

// ProviderCheck checks what a provider asks of a cluster's spec beyond the
// schema: its own block of spec.provider (fields that go together, counts), and
// what it cannot honour elsewhere (a pool bound it does not scale to). A
// provider registers one with RegisterProviderCheck, so that the cluster file's
// rules name its problems at their line while config knows nothing of any
// provider; it is called only for the provider the spec names.
type ProviderCheck func(spec *v1alpha1.ClusterSpec) []ProviderProblem

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
