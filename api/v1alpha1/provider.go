package v1alpha1

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// DefaultProvider is the provider of a cluster whose spec.provider names none.
const DefaultProvider = "local"

// ProviderName returns the name of the provider p selects: the JSON name of
// the one field it sets, DefaultProvider when p is nil or sets none.
func ProviderName(p *Provider) (string, error) {
	if p == nil {
		return DefaultProvider, nil
	}
	// The set fields are the JSON keys: a new provider adds a field, nothing here.
	raw, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("read spec.provider: %w", err)
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal(raw, &set); err != nil {
		return "", fmt.Errorf("read spec.provider: %w", err)
	}
	switch names := slices.Sorted(maps.Keys(set)); len(names) {
	case 0:
		return DefaultProvider, nil
	case 1:
		return names[0], nil
	default:
		return "", fmt.Errorf("spec.provider sets %s: expected exactly one provider", strings.Join(names, " and "))
	}
}
