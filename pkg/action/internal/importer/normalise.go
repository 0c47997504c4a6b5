package importer

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Rules named in reports when a name or version is changed.
const (
	// RuleVersion is how source versions become plugin versions.
	RuleVersion = "semantic version: a leading v dropped, missing minor and patch filled with 0 (v1.17.2 -> 1.17.2, 0.3 -> 0.3.0)"
	// RuleDNSLabel is how source names become plugin and object names.
	RuleDNSLabel = "DNS label (RFC 1123): lower-cased, every run of characters other than a-z and 0-9 (dots of an FQDN included) replaced by one '-', '-' trimmed from both ends, cut to 63 characters"
)

// Version returns the plugin version of a source version: a strict semantic
// version. A version that changes is recorded in r under field.
func Version(r *Report, field, v string) (string, error) {
	sv, err := semver.NewVersion(strings.TrimSpace(v))
	if err != nil {
		return "", fmt.Errorf("%s: version %q is not a version kubeplug can use: %w", field, v, err)
	}
	out := sv.String()
	if out != v {
		r.Normalised = append(r.Normalised, Normalised{Field: field, Original: v, Value: out, Rule: RuleVersion})
	}
	return out, nil
}

var notLabel = regexp.MustCompile(`[^a-z0-9]+`)

// Name returns the DNS label of a source name, at most max characters. A name that
// changes is recorded in r under field; a name with nothing left is an error.
func Name(r *Report, field, name string, maxLen int) (string, error) {
	out := strings.Trim(notLabel.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(out) > maxLen {
		out = strings.TrimRight(out[:maxLen], "-")
	}
	if out == "" {
		return "", fmt.Errorf("%s: name %q has no letter or digit to make a DNS label of", field, name)
	}
	if out != name {
		r.Normalised = append(r.Normalised, Normalised{Field: field, Original: name, Value: out, Rule: RuleDNSLabel})
	}
	return out, nil
}

// Constraint returns a source's Kubernetes version constraint if kubeplug reads it
// (Masterminds semver, as Helm does), and "" with the field recorded as unmapped
// otherwise.
func Constraint(r *Report, field, c string) string {
	c = strings.TrimSpace(c)
	if c == "" {
		return ""
	}
	if _, err := semver.NewConstraint(c); err != nil {
		r.Unmap(field, "constraint %q is not a semver constraint kubeplug reads: %v", c, err)
		return ""
	}
	return c
}
