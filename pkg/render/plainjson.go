package render

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kubeplug/kubeplug/pkg/model"
)

// plainCopy is what a JSON round trip (json.Marshal, then a decode with
// UseNumber) makes of v, for the values objects read from YAML or JSON hold:
// maps and lists copied, strings and booleans as they are, numbers as
// json.Number. ok is false for anything the round trip would change or
// refuse (another type, a float, a string that is not UTF-8, a number that is
// not JSON, a nil map or list), which the caller then marshals itself. It is
// an order of magnitude cheaper than the round trip.
func plainCopy(v any) (_ any, ok bool) {
	switch t := v.(type) {
	case nil, bool:
		return t, true
	case string:
		return t, utf8.ValidString(t)
	case json.Number:
		return t, validNumber(string(t))
	case int64:
		return json.Number(strconv.FormatInt(t, 10)), true
	case int:
		return json.Number(strconv.Itoa(t)), true
	case map[string]any:
		if t == nil {
			return nil, false
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			if !utf8.ValidString(k) {
				return nil, false
			}
			if out[k], ok = plainCopy(e); !ok {
				return nil, false
			}
		}
		return out, true
	case []any:
		if t == nil {
			return nil, false
		}
		out := make([]any, len(t))
		for i, e := range t {
			if out[i], ok = plainCopy(e); !ok {
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}

// validNumber is encoding/json's grammar of a number, which json.Marshal
// checks a json.Number against.
//
// Branches: the JSON number grammar, one test per production (sign, integer,
// fraction, exponent); split, it would no longer read as the grammar it checks.
func validNumber(s string) bool {
	if s != "" && s[0] == '-' {
		s = s[1:]
	}
	digits := func() int {
		n := 0
		for n < len(s) && '0' <= s[n] && s[n] <= '9' {
			n++
		}
		s = s[n:]
		return n
	}
	switch {
	case s == "":
		return false
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		digits()
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[1:]
		digits()
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
		}
		if digits() == 0 {
			return false
		}
	}
	return s == ""
}

// plainRef is kubeObject.ref of an object already decoded: ok is false when
// a key differs from apiVersion, kind, metadata, namespace or name only in
// case, which encoding/json would match and this does not.
func plainRef(obj map[string]any) (model.ObjectRef, bool) {
	if foldedKey(obj, "apiVersion", "kind", "metadata") {
		return model.ObjectRef{}, false
	}
	md, _ := obj["metadata"].(map[string]any)
	if foldedKey(md, "namespace", "name") {
		return model.ObjectRef{}, false
	}
	str := func(m map[string]any, k string) string {
		s, _ := m[k].(string)
		return s
	}
	return model.ObjectRef{APIVersion: str(obj, "apiVersion"), Kind: str(obj, "kind"), Namespace: str(md, "namespace"), Name: str(md, "name")}, true
}

// foldedKey says whether m has a key equal to one of names under Unicode case
// folding (encoding/json's match of keys to fields) but not exactly.
func foldedKey(m map[string]any, names ...string) bool {
	for k := range m {
		for _, n := range names {
			if k != n && strings.EqualFold(k, n) {
				return true
			}
		}
	}
	return false
}
