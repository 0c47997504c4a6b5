package importer

import (
	"regexp"
	"strings"

	"github.com/kubeplug/kubeplug/internal/k8sversions"
)

// renamedAPIs are removed API versions whose replacement takes the same object
// unchanged (the group's types did not change shape), so an import rewrites
// the apiVersion and says so. Removed APIs not listed here (Ingress,
// CustomResourceDefinition, webhooks: the replacement's shape differs) are not
// rewritten: the manifest is kept out of the plugin for a person to port.
var renamedAPIs = map[string]string{
	"rbac.authorization.k8s.io/v1beta1":  "rbac.authorization.k8s.io/v1",
	"rbac.authorization.k8s.io/v1alpha1": "rbac.authorization.k8s.io/v1",
	"scheduling.k8s.io/v1beta1":          "scheduling.k8s.io/v1",
	"scheduling.k8s.io/v1alpha1":         "scheduling.k8s.io/v1",
	"coordination.k8s.io/v1beta1":        "coordination.k8s.io/v1",
	"storage.k8s.io/v1beta1":             "storage.k8s.io/v1",
}

var (
	docSep      = regexp.MustCompile(`(?m)^---[ \t]*$`)
	apiVersionR = regexp.MustCompile(`(?m)^apiVersion:[ \t]*["']?([^\s"'#]+)["']?`)
	kindR       = regexp.MustCompile(`(?m)^kind:[ \t]*["']?([^\s"'#]+)["']?`)
)

// upgradeAPIs rewrites the top-level apiVersion of each document of a
// manifest whose API the newest Kubernetes kubeplug knows no longer serves,
// where renamedAPIs has a replacement of the same shape. It returns the new
// text, the rewrites made ("rbac.authorization.k8s.io/v1beta1 ClusterRole →
// rbac.authorization.k8s.io/v1") and the removed APIs it could not rewrite.
func upgradeAPIs(text string) (out string, rewrites, unported []string) {
	newest := k8sversions.Default().Supported()[0] // newest first
	docs := docSep.Split(text, -1)
	seps := docSep.FindAllString(text, -1)
	var b strings.Builder
	for i, d := range docs {
		if m, k := apiVersionR.FindStringSubmatchIndex(d), kindR.FindStringSubmatch(d); m != nil && k != nil {
			av := d[m[2]:m[3]]
			if api, st := k8sversions.ServedAPI(newest, av, k[1]); st == k8sversions.Removed {
				if to, ok := renamedAPIs[av]; ok {
					d = d[:m[2]] + to + d[m[3]:]
					rewrites = append(rewrites, av+" "+k[1]+" → "+to)
				} else {
					unported = append(unported, av+" "+k[1]+" (use "+api.Replacement+")")
				}
			}
		}
		b.WriteString(d)
		if i < len(seps) {
			b.WriteString(seps[i])
		}
	}
	return b.String(), rewrites, unported
}
