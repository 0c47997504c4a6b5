package controlplane

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// flag is one --name=value command-line flag.
type flag struct{ name, value string }

// buildArgs renders defaults, in their order, with overrides replacing values of
// the same name, followed by the remaining overrides sorted by name, so the
// command line is deterministic. The feature gates are merged into
// --feature-gates unless the overrides set that flag themselves.
func buildArgs(defaults []flag, overrides map[string]string, gates map[string]bool) []string {
	// Callers may write names with or without leading dashes.
	norm := make(map[string]string, len(overrides)+1)
	for k, v := range overrides {
		norm[strings.TrimLeft(k, "-")] = v
	}
	overrides = norm
	if _, set := overrides["feature-gates"]; !set && len(gates) > 0 {
		overrides["feature-gates"] = featureGates(gates)
	}
	args := make([]string, 0, len(defaults)+len(overrides))
	seen := map[string]bool{}
	for _, f := range defaults {
		v := f.value
		if o, ok := overrides[f.name]; ok {
			v = o
		}
		seen[f.name] = true
		args = append(args, "--"+f.name+"="+v)
	}
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		if !seen[name] {
			args = append(args, "--"+name+"="+overrides[name])
		}
	}
	return args
}

// featureGates renders gates as kube's "A=true,B=false", sorted by name.
func featureGates(gates map[string]bool) string {
	parts := make([]string, 0, len(gates))
	for _, name := range slices.Sorted(maps.Keys(gates)) {
		parts = append(parts, name+"="+strconv.FormatBool(gates[name]))
	}
	return strings.Join(parts, ",")
}
