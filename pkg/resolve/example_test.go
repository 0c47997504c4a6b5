package resolve_test

import (
	"context"
	"fmt"

	"github.com/Masterminds/semver/v3"

	"github.com/kubeplug/kubeplug/pkg/resolve"
)

func Example() {
	c := func(s string) *semver.Constraints { return must(semver.NewConstraint(s)) }
	cat := resolve.NewCatalog(
		&resolve.Package{Name: "cni", Version: semver.MustParse("1.2.0")},
		&resolve.Package{Name: "cert-manager", Version: semver.MustParse("1.14.0")},
		&resolve.Package{Name: "cert-manager", Version: semver.MustParse("1.15.0"), KubernetesVersion: c(">=1.33")},
		&resolve.Package{
			Name:     "dex",
			Version:  semver.MustParse("1.4.0"),
			Requires: []resolve.Requirement{{Name: "cert-manager", Constraint: c(">=1.14")}},
			After:    []string{"ingress-nginx"}, // not enabled: no effect
		},
	)
	res, err := resolve.Resolve(context.Background(), cat, resolve.Request{
		Enabled:           []resolve.Requirement{{Name: "dex", Constraint: c("^1.4")}, {Name: "cni"}},
		KubernetesVersion: semver.MustParse("1.32.0"),
		Order:             []string{"cni"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, wave := range res.Waves {
		fmt.Println(i, wave)
	}
	// Output:
	// 0 [cni 1.2.0]
	// 1 [cert-manager 1.14.0]
	// 2 [dex 1.4.0]
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
