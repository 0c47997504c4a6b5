package plugin

import (
	"errors"
	"strconv"
	"strings"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/internal/yamldoc"
	"github.com/kubeplug/kubeplug/pkg/diag"
	"github.com/kubeplug/kubeplug/pkg/hookspec"
)

// checkHooks finds at lint time what the node agent would fail on a machine at boot:
// a `when` that does not compile (in the agent's own CEL environment), a url hook
// without a valid sha256 or with a scheme the agent does not fetch, before and
// requires naming a hook this plugin does not have (in the same phase), and hooks
// ordering each other in a loop. Names of other plugins' hooks can only be checked
// on the machine, where the agent reports a requirement that is missing.
//
// Branches: one check per rule the node agent enforces at boot (when compiles,
// url scheme, sha256 valid, sha256 only with a url, each before/requires ref
// well formed, present and in the same phase, no cycle per phase), each
// reported at its own field, as hookspec/manifest.go checks them on the agent.
func checkHooks(doc *yamldoc.Doc, l *diag.List, ptr string, hooks []v1alpha1.NodeHook) {
	if len(hooks) == 0 {
		return
	}
	plugin := manifestName(doc)
	byName := map[string]int{}
	for i, h := range hooks {
		if _, dup := byName[h.Name]; !dup {
			byName[h.Name] = i
		}
	}
	// own resolves a before or requires name to one of this plugin's hooks.
	own := func(ref string) (string, bool) {
		p, n, qualified := strings.Cut(ref, "/")
		if !qualified {
			return p, true
		}
		return n, p == plugin
	}
	phases := map[string][]hookspec.Hook{}
	var phaseOrder []string
	for i, h := range hooks {
		hp := ptr + "/hooks/" + strconv.Itoa(i)
		if h.When != "" {
			if err := hookspec.CheckCondition(h.When); err != nil {
				doc.Errorf(l, hp+"/when", "hook %s of plugin %s: %v", h.Name, plugin, err)
			}
		}
		switch {
		case h.Run.URL != "":
			if err := hookspec.CheckURL(h.Run.URL); err != nil {
				doc.Errorf(l, hp+"/run/url", "hook %s of plugin %s: %v", h.Name, plugin, err)
			}
			if err := hookspec.CheckSHA256(h.Run.SHA256); err != nil {
				at := hp + "/run/url"
				if doc.Has(hp + "/run/sha256") {
					at = hp + "/run/sha256"
				}
				doc.Errorf(l, at, "hook %s of plugin %s: %v", h.Name, plugin, err)
			}
		case h.Run.SHA256 != "":
			doc.Errorf(l, hp+"/run/sha256", "hook %s of plugin %s: sha256 pins the script of a url, and the hook has no url", h.Name, plugin)
		}
		ah := hookspec.Hook{Plugin: plugin, Name: h.Name, At: h.At}
		for _, list := range []struct {
			field string
			refs  []string
			keep  *[]string
		}{{"before", h.Before, &ah.Before}, {"requires", h.Requires, &ah.Requires}} {
			for j, r := range list.refs {
				rp := hp + "/" + list.field + "/" + strconv.Itoa(j)
				if err := hookspec.CheckRef(r); err != nil {
					doc.Errorf(l, rp, "hook %s of plugin %s: %v", h.Name, plugin, err)
					continue
				}
				name, ok := own(r)
				if !ok {
					continue
				}
				k, found := byName[name]
				switch {
				case !found:
					doc.Errorf(l, rp, "hook %s of plugin %s: %s names hook %q, which this plugin does not have here (known: %s)", h.Name, plugin, list.field, r, known(hooks))
				case hooks[k].At != h.At:
					doc.Errorf(l, rp, "hook %s of plugin %s: %s names hook %q, which runs at %s, not %s; hooks order only within a phase", h.Name, plugin, list.field, r, hooks[k].At, h.At)
				default:
					*list.keep = append(*list.keep, name)
				}
			}
		}
		if _, ok := phases[h.At]; !ok {
			phaseOrder = append(phaseOrder, h.At)
		}
		phases[h.At] = append(phases[h.At], ah)
	}
	for _, at := range phaseOrder {
		_, err := hookspec.Order(phases[at])
		if ce := (*hookspec.CycleError)(nil); errors.As(err, &ce) {
			first := ce.Chain[0][strings.IndexByte(ce.Chain[0], '/')+1:]
			doc.Errorf(l, ptr+"/hooks/"+strconv.Itoa(byName[first]), "hooks of plugin %s wait for each other in a cycle (before and requires): %s", plugin, strings.Join(ce.Chain, " -> "))
		}
	}
}

// manifestName is the plugin's name for messages; the checks run before the
// manifest is decoded into its type.
func manifestName(doc *yamldoc.Doc) string {
	if m, ok := doc.Value.(map[string]any); ok {
		if md, ok := m["metadata"].(map[string]any); ok {
			if n, ok := md["name"].(string); ok && n != "" {
				return n
			}
		}
	}
	return "plugin"
}

func known(hooks []v1alpha1.NodeHook) string {
	names := make([]string, len(hooks))
	for i, h := range hooks {
		names[i] = h.Name
	}
	return strings.Join(names, ", ")
}

// runSources counts what a hook's run sets of command, script and url: exactly one
// is valid.
func runSources(r v1alpha1.HookRun) int {
	n := 0
	for _, set := range []bool{len(r.Command) > 0, r.Script != "", r.URL != ""} {
		if set {
			n++
		}
	}
	return n
}
