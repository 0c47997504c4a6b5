package action

import (
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// unstructuredOf is a rendered object (its numbers json.Number, as render
// decodes them, or Go integers) in the form unstructured objects hold: int64
// for an integer, float64 for any other number, exactly as a JSON round trip
// through UnmarshalJSON makes them, without one. Like UnmarshalJSON, it wants
// a kind.
func unstructuredOf(o map[string]any) (*unstructured.Unstructured, error) {
	if k, _ := o["kind"].(string); k == "" {
		return nil, fmt.Errorf("object has no kind")
	}
	v, err := jsonValue(o)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: v.(map[string]any)}, nil
}

// jsonValue copies v, converting its numbers as sigs.k8s.io/json's
// UnmarshalCaseSensitivePreserveInts does: int64 when the number parses as
// one, else float64.
func jsonValue(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			c, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			c, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case nil, string, bool, int64:
		return t, nil
	case json.Number:
		return number(string(t))
	case int:
		return int64(t), nil
	case int32:
		return int64(t), nil
	case float64, float32, uint, uint32, uint64:
		// As JSON writes it, then reads it back.
		b, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		return number(string(b))
	}
	// Anything else (a struct a runtime left in): the JSON round trip itself.
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := utiljson.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func number(s string) (any, error) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s: %w", s, err)
	}
	return f, nil
}
