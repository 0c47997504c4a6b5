package resolve

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/internal/suggest"
)

// Sentinel errors, one per way resolution can fail. Every error Resolve
// returns for bad input matches exactly one of them with [errors.Is]; the typed
// errors below carry the details. All of them are terminal: retrying with the
// same catalog and request gives the same error. A cancelled context is
// reported as the context's error instead.
var (
	// ErrMissing: a plugin is enabled or required but no source provides it.
	ErrMissing = errors.New("missing plugin")
	// ErrUnsatisfiable: versions exist but none satisfies every constraint
	// placed on the name.
	ErrUnsatisfiable = errors.New("unsatisfiable version constraints")
	// ErrKubernetesVersion: every version that would otherwise do refuses the
	// cluster's Kubernetes version.
	ErrKubernetesVersion = errors.New("unsupported kubernetes version")
	// ErrProvider: every version that would otherwise do runs on other
	// providers than the cluster's.
	ErrProvider = errors.New("unsupported provider")
	// ErrConflict: two plugins that must be installed exclude each other.
	ErrConflict = errors.New("conflicting plugins")
	// ErrCycle: the ordering edges between the selected plugins form a cycle.
	ErrCycle = errors.New("dependency cycle")
	// ErrOrder: the cluster's order list is malformed or contradicts the
	// dependencies of the plugins it names.
	ErrOrder = errors.New("invalid order list")
)

// RequestedBy is the origin used for constraints that come from the request
// rather than from a package, as in "cluster requires dex ^1.4".
const RequestedBy = "cluster"

// Want is one constraint placed on a plugin name, and who placed it.
type Want struct {
	// By is RequestedBy or the "name version" of the requiring package.
	By string
	// Name is the required plugin.
	Name string
	// Constraint is nil when any version will do.
	Constraint *semver.Constraints
	// Package is the requiring package, nil when By is RequestedBy: what a
	// caller needs to point at the requirement in that package's manifest.
	Package *Package
}

// String returns "by requires name constraint".
func (w Want) String() string {
	s := w.By + " requires " + w.Name
	if w.Constraint != nil {
		s += " " + w.Constraint.String()
	}
	return s
}

func joinWants(ws []Want) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.String()
	}
	return strings.Join(parts, "; ")
}

// MissingError reports a plugin that is required but that no source provides,
// with the closest names the catalog holds when it is a [NameLister]:
//
//	dex 1.4.0 requires cert-manger >=1.14, which no source provides; did you mean "cert-manager"?
type MissingError struct {
	Name  string
	Wants []Want // every constraint on Name at the time, in the order placed
	// Suggestions are the catalog's names closest to Name, closest first;
	// empty when none is close or the catalog cannot list its names.
	Suggestions []string
}

func (e *MissingError) Error() string {
	return joinWants(e.Wants) + ", which no source provides" + suggest.Hint(e.Suggestions)
}

// Is reports whether target is ErrMissing.
func (e *MissingError) Is(target error) bool { return target == ErrMissing }

// Unsupported is a version excluded by the cluster's Kubernetes version.
type Unsupported struct {
	Version *semver.Version
	Needs   *semver.Constraints // the package's KubernetesVersion
	// Providers are the package's providers when they exclude the cluster's.
	Providers []string
}

func (u Unsupported) String() string {
	if len(u.Providers) > 0 {
		return u.Version.String() + " runs on " + strings.Join(u.Providers, ", ")
	}
	return u.Version.String() + " needs " + u.Needs.String()
}

// UnsatisfiableError reports a plugin for which no version satisfies every
// constraint placed on it together with the Kubernetes version.
//
//	cannot pick a version of dex: cluster requires dex ^2.0; cert-manager 1.14.0 requires dex <2.0; available: 2.1.0, 1.4.0, 1.3.2; Kubernetes 1.30.0 excludes 2.1.0 (needs >=1.33)
//
// The Kubernetes part appears only when some version was excluded by it.
type UnsatisfiableError struct {
	Name        string
	Wants       []Want            // every constraint on Name, in the order placed
	Available   []*semver.Version // every version the sources hold, highest first
	Kubernetes  *semver.Version   // the cluster's version; nil if not checked
	Unsupported []Unsupported     // versions the Kubernetes version excludes, highest first
}

func (e *UnsatisfiableError) Error() string {
	var b strings.Builder
	b.WriteString("cannot pick a version of ")
	b.WriteString(e.Name)
	b.WriteString(": ")
	b.WriteString(joinWants(e.Wants))
	b.WriteString("; available: ")
	for i, v := range e.Available {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v.String())
	}
	if len(e.Unsupported) > 0 {
		b.WriteString("; Kubernetes ")
		b.WriteString(e.Kubernetes.String())
		b.WriteString(" excludes ")
		for i, u := range e.Unsupported {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(u.Version.String() + " (needs " + u.Needs.String() + ")")
		}
	}
	return b.String()
}

// Is reports whether target is ErrUnsatisfiable.
func (e *UnsatisfiableError) Is(target error) bool { return target == ErrUnsatisfiable }

// KubernetesVersionError reports a plugin whose versions all refuse the
// cluster's Kubernetes version, although the constraints on it would accept
// any of them.
//
//	dex: no version supports Kubernetes 1.30.0 (1.4.0 needs >=1.33, 1.3.2 needs >=1.31)
type KubernetesVersionError struct {
	Name        string
	Kubernetes  *semver.Version
	Unsupported []Unsupported // every version, highest first
}

func (e *KubernetesVersionError) Error() string {
	parts := make([]string, len(e.Unsupported))
	for i, u := range e.Unsupported {
		parts[i] = u.String()
	}
	return e.Name + ": no version supports Kubernetes " + e.Kubernetes.String() + " (" + strings.Join(parts, ", ") + ")"
}

// Is reports whether target is ErrKubernetesVersion.
func (e *KubernetesVersionError) Is(target error) bool { return target == ErrKubernetesVersion }

// ProviderError reports a plugin whose versions all refuse the cluster's
// provider (their spec.providers), although the constraints on it would accept
// them.
//
//	my-plugin (required by cluster) runs only on the aws provider (spec.providers), not on local: 1.0.0 runs on aws
type ProviderError struct {
	Name, Provider string
	RequiredBy     []string
	Unsupported    []Unsupported // every version, highest first
}

func (e *ProviderError) Error() string {
	var provs []string
	parts := make([]string, len(e.Unsupported))
	for i, u := range e.Unsupported {
		parts[i] = u.String()
		for _, p := range u.Providers {
			if !slices.Contains(provs, p) {
				provs = append(provs, p)
			}
		}
	}
	by := ""
	if len(e.RequiredBy) > 0 {
		by = " (required by " + strings.Join(e.RequiredBy, ", ") + ")"
	}
	return fmt.Sprintf("%s%s runs only on the %s provider (spec.providers), not on %s: %s",
		e.Name, by, strings.Join(provs, " or "), e.Provider, strings.Join(parts, ", "))
}

// Is reports whether target is ErrProvider.
func (e *ProviderError) Is(target error) bool { return target == ErrProvider }

// ConflictError reports two plugins that exclude each other. Plugin declares
// the conflict; Other is the plugin it names. A side that was not selected yet
// has a nil version.
//
//	dex 1.4.0 (required by cluster) conflicts with other-oidc 1.0.0 (required by sso 2.0.0, cluster)
//	dex 1.4.0 (required by cluster) conflicts with other-oidc (required by sso 2.0.0)
type ConflictError struct {
	Plugin, Other                     string
	PluginVersion, OtherVersion       *semver.Version
	PluginRequiredBy, OtherRequiredBy []string // who brought each in, in the order they did
}

func (e *ConflictError) Error() string {
	side := func(name string, v *semver.Version, by []string) string {
		if v != nil {
			name += " " + v.String()
		}
		return name + " (required by " + strings.Join(by, ", ") + ")"
	}
	return side(e.Plugin, e.PluginVersion, e.PluginRequiredBy) + " conflicts with " + side(e.Other, e.OtherVersion, e.OtherRequiredBy)
}

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// CycleError reports ordering edges that form a cycle. Chain reads in
// "waits for" direction and starts and ends with the same plugin, rotated so
// that it starts with the lexicographically smallest name; Reasons[i] says why
// Chain[i] waits for Chain[i+1], in the words of the declaration:
//
//	dependency cycle: a -> b -> c -> a (a requires b; b after c; a before c)
//
// A reason is one of "x requires y", "x after y", "x before y" (the
// plugins' fields) or "order list puts x before y".
type CycleError struct {
	Chain   []string
	Reasons []string
}

func (e *CycleError) Error() string {
	return "dependency cycle: " + strings.Join(e.Chain, " -> ") + " (" + strings.Join(e.Reasons, "; ") + ")"
}

// Is reports whether target is ErrCycle.
func (e *CycleError) Is(target error) bool { return target == ErrCycle }

// OrderError reports an order list that cannot be honoured.
//
//	order list names cni twice
//	order list puts cni before every unlisted plugin, but cni requires flannel; add flannel to the order list before cni
type OrderError struct {
	// Plugin is the listed plugin at fault.
	Plugin string
	// Unlisted is the selected plugin the order list would have to place
	// after Plugin but that must come before it; empty for a duplicate.
	Unlisted string
	// Reason is the declaration that orders Unlisted before Plugin, as in
	// CycleError.Reasons.
	Reason string
}

func (e *OrderError) Error() string {
	if e.Unlisted == "" {
		return "order list names " + e.Plugin + " twice"
	}
	return "order list puts " + e.Plugin + " before every unlisted plugin, but " + e.Reason +
		"; add " + e.Unlisted + " to the order list before " + e.Plugin
}

// Is reports whether target is ErrOrder.
func (e *OrderError) Is(target error) bool { return target == ErrOrder }
