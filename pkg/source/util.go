package source

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

func parseConstraint(c string) (*semver.Constraints, error) {
	v, err := semver.NewConstraint(c)
	if err != nil {
		return nil, fmt.Errorf("invalid version constraint %q: %w", c, err)
	}
	return v, nil
}

func joinComma(s []string) string { return strings.Join(s, ", ") }
