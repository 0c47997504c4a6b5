package declarative

import (
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/kubeplug/kubeplug/api/v1alpha1"
	"github.com/kubeplug/kubeplug/pkg/values"
)

// FromValue is the key of a value reference in a Helm release's values:
// {fromValue: /json/pointer} stands for the plugin's value at that pointer.
const FromValue = "fromValue"

// releaseValues builds what a release hands its chart, as `helm install -f a -f b
// --set …` does: the values files in order, each merged over the one before
// (mappings merge, anything else is replaced), then the rendered values over them.
// Value references are resolved against the plugin's values and keep their types.
// ptr is the release's place in plugin.yaml.
func (r *renderer) releaseValues(ptr string, h v1alpha1.HelmRelease, pluginValues map[string]any) (map[string]any, bool) {
	out := map[string]any{}
	ok := true
	for i, f := range h.ValuesFiles {
		fp := ptr + "/valuesFiles/" + strconv.Itoa(i)
		b, err := r.read(f)
		if err != nil {
			r.errorf(fp, "%v", err)
			ok = false
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			r.errorf(fp, "values file %s is not a YAML mapping: %v", f, err)
			ok = false
			continue
		}
		out = values.Merge(out, m)
	}
	if !ok {
		return nil, false
	}
	v, keep := r.resolveRefs(ptr+"/values", h.Values, pluginValues, &ok)
	if !ok {
		return nil, false
	}
	if m, _ := v.(map[string]any); keep && m != nil {
		out = values.Merge(out, m)
	}
	if len(out) == 0 {
		return nil, true
	}
	return out, true
}

// resolveRefs replaces each {fromValue: POINTER} in v by the plugin's value there
// (the empty pointer "" is every value).
// keep is false for a reference to a value that is not set: its key is left out, so
// the chart's default applies, as with an optional template value.
func (r *renderer) resolveRefs(ptr string, v any, pluginValues map[string]any, ok *bool) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		if ref, isRef := t[FromValue]; isRef && len(t) == 1 {
			p, isStr := ref.(string)
			if !isStr {
				r.errorf(ptr+"/"+FromValue, "%s must be a JSON pointer into the plugin's values such as /chartArgs, found %v", FromValue, ref)
				*ok = false
				return nil, false
			}
			if _, err := values.SplitPointer(p); err != nil {
				r.errorf(ptr+"/"+FromValue, "%s must be a JSON pointer into the plugin's values such as /chartArgs, found %q", FromValue, p)
				*ok = false
				return nil, false
			}
			got, found := values.Get(pluginValues, p)
			if !found {
				return nil, false
			}
			return deepCopy(got), true
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			if rv, keep := r.resolveRefs(ptr+"/"+escapePtr(k), e, pluginValues, ok); keep {
				out[k] = rv
			}
		}
		return out, true
	case []any:
		out := make([]any, 0, len(t))
		for i, e := range t {
			rv, keep := r.resolveRefs(ptr+"/"+strconv.Itoa(i), e, pluginValues, ok)
			if !keep {
				rv = nil // a list keeps its positions
			}
			out = append(out, rv)
		}
		return out, true
	}
	return v, true
}

func deepCopy(v any) any {
	if m, ok := v.(map[string]any); ok {
		return values.DeepCopy(m)
	}
	if l, ok := v.([]any); ok {
		return values.DeepCopy(map[string]any{"l": l})["l"]
	}
	return v
}
