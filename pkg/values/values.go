package values

import (
	"fmt"
	"strconv"
	"strings"
)

// Redacted replaces a sensitive value wherever values are shown.
const Redacted = "***"

// Merge returns base deep-merged with over: over wins, mappings merge recursively,
// anything else is replaced. Neither input is modified; the result shares no mapping
// or list with them.
func Merge(base, over map[string]any) map[string]any {
	out := DeepCopy(base)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range over {
		if bm, ok := out[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				out[k] = Merge(bm, om)
				continue
			}
		}
		out[k] = deepCopyValue(v)
	}
	return out
}

// DeepCopy copies a values tree.
func DeepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return DeepCopy(t)
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = deepCopyValue(e)
		}
		return s
	}
	return v
}

// SplitPointer parses a JSON pointer (RFC 6901) into its unescaped tokens.
func SplitPointer(ptr string) ([]string, error) {
	if ptr == "" {
		return nil, nil
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, fmt.Errorf("JSON pointer %q must start with '/'", ptr)
	}
	toks := strings.Split(ptr[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

// Get returns the value at ptr and whether it exists.
func Get(root map[string]any, ptr string) (any, bool) {
	toks, err := SplitPointer(ptr)
	if err != nil {
		return nil, false
	}
	var cur any = root
	for _, t := range toks {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// Set stores v at ptr in root, creating mappings on the way. It refuses to descend
// into a scalar or a list.
func Set(root map[string]any, ptr string, v any) error {
	toks, err := SplitPointer(ptr)
	if err != nil {
		return err
	}
	if len(toks) == 0 {
		return fmt.Errorf("cannot set the root of the values")
	}
	cur := root
	for i, t := range toks[:len(toks)-1] {
		next, ok := cur[t]
		if !ok || next == nil {
			m := map[string]any{}
			cur[t] = m
			cur = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return fmt.Errorf("cannot set %s: %s is not a mapping", ptr, "/"+strings.Join(toks[:i+1], "/"))
		}
		cur = m
	}
	cur[toks[len(toks)-1]] = v
	return nil
}

// Redact returns a copy of v with the value at every sensitive pointer that exists
// replaced by Redacted.
func Redact(v map[string]any, sensitive []string) map[string]any {
	if len(sensitive) == 0 {
		return v
	}
	out := DeepCopy(v)
	for _, p := range sensitive {
		if cur, ok := Get(out, p); ok && cur != nil && cur != "" {
			replace(out, p, Redacted)
		}
	}
	return out
}

// SensitiveValues returns the scalar values at, or inside, every sensitive pointer
// of v, as text: what must not reach anyone but the values' owner. Pointers that
// do not exist contribute nothing.
func SensitiveValues(v map[string]any, sensitive []string) []string {
	var out []string
	var collect func(x any)
	collect = func(x any) {
		switch c := x.(type) {
		case map[string]any:
			for _, e := range c {
				collect(e)
			}
		case []any:
			for _, e := range c {
				collect(e)
			}
		case string:
			if c != "" && c != Redacted {
				out = append(out, c)
			}
		case nil, bool:
		default:
			out = append(out, fmt.Sprint(c))
		}
	}
	for _, p := range sensitive {
		if cur, ok := Get(v, p); ok {
			collect(cur)
		}
	}
	return out
}

// replace overwrites the existing value at ptr, descending through mappings and
// lists alike (Set refuses lists, but a sensitive value may sit in a list item).
func replace(root map[string]any, ptr string, v any) {
	toks, err := SplitPointer(ptr)
	if err != nil || len(toks) == 0 {
		return
	}
	var cur any = root
	for i, t := range toks {
		last := i == len(toks)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[t] = v
				return
			}
			cur = c[t]
		case []any:
			j, err := strconv.Atoi(t)
			if err != nil || j < 0 || j >= len(c) {
				return
			}
			if last {
				c[j] = v
				return
			}
			cur = c[j]
		default:
			return
		}
	}
}

// IsSensitive reports whether ptr is, or is inside, one of the sensitive pointers.
func IsSensitive(ptr string, sensitive []string) bool {
	for _, s := range sensitive {
		if ptr == s || strings.HasPrefix(ptr, s+"/") {
			return true
		}
	}
	return false
}
