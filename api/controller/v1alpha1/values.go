package v1alpha1

// Values are a plugin's values: free-form YAML, as in a cluster file. The API
// server keeps their unknown fields; JSON decoding gives them maps, slices,
// strings, bools, nil, and int64 or float64 numbers.
type Values map[string]any

// DeepCopyInto copies v into out, every map and slice of it anew. (By hand:
// controller-gen copies no interface values; it calls this for the Values
// fields of the types.)
func (v Values) DeepCopyInto(out *Values) {
	if v == nil {
		*out = nil
		return
	}
	*out = copyValue(map[string]any(v)).(map[string]any)
}

// DeepCopy returns a copy of v that shares no map or slice with it.
func (v Values) DeepCopy() Values {
	var out Values
	v.DeepCopyInto(&out)
	return out
}

func copyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = copyValue(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyValue(e)
		}
		return out
	}
	return v // scalars, copied by value
}
