package jsonenc

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
)

// Append appends v as encoding/json's Marshal writes it (sorted keys, HTML
// characters escaped, ES6 number forms), for the values unstructured objects
// hold, without reflection; ok is false for a value of another type or a
// number JSON cannot hold, which the caller then marshals itself (Marshal
// does). Digests of objects (ssa.StampDigest) depend on these bytes: they must
// not change.
//
// Branches: one case per JSON value type, as encoding/json's own encoder has; the
// bytes must match Marshal's exactly, which is easiest to check against one
// switch.
func Append(b []byte, v any) (_ []byte, ok bool) {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, t), true
	case string:
		return appendString(b, t), true
	case int64:
		return strconv.AppendInt(b, t, 10), true
	case int:
		return strconv.AppendInt(b, int64(t), 10), true
	case float64:
		return appendFloat(b, t)
	case map[string]any:
		if t == nil {
			return append(b, "null"...), true
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			if b, ok = Append(b, t[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	case []any:
		if t == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = Append(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	return b, false
}

// Marshal is json.Marshal(v), written by Append when it can.
func Marshal(v any) ([]byte, error) {
	if b, ok := Append(make([]byte, 0, 512), v); ok {
		return b, nil
	}
	return json.Marshal(v)
}

// appendString writes a string with nothing to escape as it is, and leaves any
// other to encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat is encoding/json's float64 form.
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}
