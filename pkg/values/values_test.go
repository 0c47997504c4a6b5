package values_test

import (
	"reflect"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/values"
)

func TestMerge(t *testing.T) {
	tests := []struct {
		name       string
		base, over map[string]any
		want       map[string]any
	}{
		{name: "both nil", want: map[string]any{}},
		{name: "nil base", over: map[string]any{"a": 1}, want: map[string]any{"a": 1}},
		{name: "nil over", base: map[string]any{"a": 1}, want: map[string]any{"a": 1}},
		{
			name: "over wins on scalars",
			base: map[string]any{"a": 1, "b": "x"},
			over: map[string]any{"a": 2},
			want: map[string]any{"a": 2, "b": "x"},
		},
		{
			name: "maps merge deeply",
			base: map[string]any{"img": map[string]any{"repo": "r", "tag": "1", "pull": map[string]any{"policy": "Always", "secret": "s"}}},
			over: map[string]any{"img": map[string]any{"tag": "2", "pull": map[string]any{"policy": "Never"}}},
			want: map[string]any{"img": map[string]any{"repo": "r", "tag": "2", "pull": map[string]any{"policy": "Never", "secret": "s"}}},
		},
		{
			name: "lists are replaced, not merged",
			base: map[string]any{"args": []any{"a", "b", "c"}},
			over: map[string]any{"args": []any{"d"}},
			want: map[string]any{"args": []any{"d"}},
		},
		{
			name: "a map replaces a scalar",
			base: map[string]any{"a": "x"},
			over: map[string]any{"a": map[string]any{"b": 1}},
			want: map[string]any{"a": map[string]any{"b": 1}},
		},
		{
			name: "a scalar replaces a map",
			base: map[string]any{"a": map[string]any{"b": 1}},
			over: map[string]any{"a": "x"},
			want: map[string]any{"a": "x"},
		},
		{
			name: "null in over replaces",
			base: map[string]any{"a": map[string]any{"b": 1}},
			over: map[string]any{"a": nil},
			want: map[string]any{"a": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, over := values.DeepCopy(tt.base), values.DeepCopy(tt.over)
			got := values.Merge(tt.base, tt.over)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Merge = %#v, want %#v", got, tt.want)
			}
			if !reflect.DeepEqual(tt.base, base) || !reflect.DeepEqual(tt.over, over) {
				t.Errorf("Merge modified its inputs: base %#v, over %#v", tt.base, tt.over)
			}
		})
	}
}

func TestMergeSharesNothing(t *testing.T) {
	base := map[string]any{"m": map[string]any{"k": "v"}, "l": []any{map[string]any{"x": 1}}}
	over := map[string]any{"o": map[string]any{"k": "v"}, "ol": []any{"a"}}
	got := values.Merge(base, over)
	got["m"].(map[string]any)["k"] = "changed"
	got["l"].([]any)[0].(map[string]any)["x"] = 2
	got["o"].(map[string]any)["k"] = "changed"
	got["ol"].([]any)[0] = "changed"
	if base["m"].(map[string]any)["k"] != "v" || base["l"].([]any)[0].(map[string]any)["x"] != 1 {
		t.Errorf("the result shares data with base: %#v", base)
	}
	if over["o"].(map[string]any)["k"] != "v" || over["ol"].([]any)[0] != "a" {
		t.Errorf("the result shares data with over: %#v", over)
	}
}

func TestSplitPointer(t *testing.T) {
	tests := []struct {
		ptr     string
		want    []string
		wantErr bool
	}{
		{ptr: "", want: nil},
		{ptr: "/", want: []string{""}},
		{ptr: "/a", want: []string{"a"}},
		{ptr: "/a/b/0", want: []string{"a", "b", "0"}},
		{ptr: "/a~1b", want: []string{"a/b"}},
		{ptr: "/m~0n", want: []string{"m~n"}},
		{ptr: "/~01", want: []string{"~1"}}, // ~0 first would give "/": RFC 6901 order matters
		{ptr: "/~10", want: []string{"/0"}},
		{ptr: "/a//b", want: []string{"a", "", "b"}},
		{ptr: "a", wantErr: true},
		{ptr: "a/b", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.ptr, func(t *testing.T) {
			got, err := values.SplitPointer(tt.ptr)
			if (err != nil) != tt.wantErr {
				t.Fatalf("SplitPointer(%q) error = %v, want error %v", tt.ptr, err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("SplitPointer(%q) = %q, want %q", tt.ptr, got, tt.want)
			}
		})
	}
}

func TestGet(t *testing.T) {
	root := map[string]any{
		"a":   map[string]any{"b": "c", "n": nil},
		"l":   []any{"x", map[string]any{"y": "z"}},
		"a/b": "slash",
		"m~n": "tilde",
		"":    "empty key",
	}
	tests := []struct {
		ptr    string
		want   any
		wantOK bool
	}{
		{ptr: "", want: root, wantOK: true},
		{ptr: "/a/b", want: "c", wantOK: true},
		{ptr: "/a/n", want: nil, wantOK: true},
		{ptr: "/a/missing", wantOK: false},
		{ptr: "/a/b/c", wantOK: false},
		{ptr: "/l/0", want: "x", wantOK: true},
		{ptr: "/l/1/y", want: "z", wantOK: true},
		{ptr: "/l/2", wantOK: false},
		{ptr: "/l/-1", wantOK: false},
		{ptr: "/l/x", wantOK: false},
		{ptr: "/a~1b", want: "slash", wantOK: true},
		{ptr: "/m~0n", want: "tilde", wantOK: true},
		{ptr: "/", want: "empty key", wantOK: true},
		{ptr: "a", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.ptr, func(t *testing.T) {
			got, ok := values.Get(root, tt.ptr)
			if ok != tt.wantOK || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Get(%q) = %#v, %v; want %#v, %v", tt.ptr, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestSet(t *testing.T) {
	tests := []struct {
		name    string
		root    map[string]any
		ptr     string
		v       any
		want    map[string]any
		wantErr bool
	}{
		{name: "top level", root: map[string]any{}, ptr: "/a", v: 1, want: map[string]any{"a": 1}},
		{name: "creates mappings", root: map[string]any{}, ptr: "/a/b/c", v: "x", want: map[string]any{"a": map[string]any{"b": map[string]any{"c": "x"}}}},
		{name: "replaces null on the way", root: map[string]any{"a": nil}, ptr: "/a/b", v: 1, want: map[string]any{"a": map[string]any{"b": 1}}},
		{name: "keeps siblings", root: map[string]any{"a": map[string]any{"k": 1}}, ptr: "/a/b", v: 2, want: map[string]any{"a": map[string]any{"k": 1, "b": 2}}},
		{name: "overwrites", root: map[string]any{"a": "old"}, ptr: "/a", v: "new", want: map[string]any{"a": "new"}},
		{name: "escapes", root: map[string]any{}, ptr: "/a~1b/m~0n", v: 1, want: map[string]any{"a/b": map[string]any{"m~n": 1}}},
		{name: "root refused", root: map[string]any{}, ptr: "", v: 1, want: map[string]any{}, wantErr: true},
		{name: "not a pointer", root: map[string]any{}, ptr: "a", v: 1, want: map[string]any{}, wantErr: true},
		{name: "through a scalar", root: map[string]any{"a": "x"}, ptr: "/a/b", v: 1, want: map[string]any{"a": "x"}, wantErr: true},
		{name: "through a list", root: map[string]any{"a": []any{"x"}}, ptr: "/a/0", v: 1, want: map[string]any{"a": []any{"x"}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := values.Set(tt.root, tt.ptr, tt.v)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Set(%q) error = %v, want error %v", tt.ptr, err, tt.wantErr)
			}
			if !reflect.DeepEqual(tt.root, tt.want) {
				t.Errorf("after Set(%q): %#v, want %#v", tt.ptr, tt.root, tt.want)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name      string
		v         map[string]any
		sensitive []string
		want      map[string]any
	}{
		{name: "no sensitive pointers", v: map[string]any{"a": "x"}, want: map[string]any{"a": "x"}},
		{name: "top level", v: map[string]any{"token": "s3cret", "a": "x"}, sensitive: []string{"/token"}, want: map[string]any{"token": values.Redacted, "a": "x"}},
		{name: "nested", v: map[string]any{"db": map[string]any{"password": "pw", "user": "u"}}, sensitive: []string{"/db/password"}, want: map[string]any{"db": map[string]any{"password": values.Redacted, "user": "u"}}},
		{name: "a whole mapping", v: map[string]any{"creds": map[string]any{"k": "v"}}, sensitive: []string{"/creds"}, want: map[string]any{"creds": values.Redacted}},
		{name: "absent stays absent", v: map[string]any{"a": "x"}, sensitive: []string{"/token", "/db/password"}, want: map[string]any{"a": "x"}},
		{name: "empty string stays empty", v: map[string]any{"token": ""}, sensitive: []string{"/token"}, want: map[string]any{"token": ""}},
		{name: "null stays null", v: map[string]any{"token": nil}, sensitive: []string{"/token"}, want: map[string]any{"token": nil}},
		{name: "a number is hidden too", v: map[string]any{"pin": 1234}, sensitive: []string{"/pin"}, want: map[string]any{"pin": values.Redacted}},
		{name: "inside a list item", v: map[string]any{"users": []any{map[string]any{"name": "a", "password": "pw"}}}, sensitive: []string{"/users/0/password"}, want: map[string]any{"users": []any{map[string]any{"name": "a", "password": values.Redacted}}}},
		{name: "a list item", v: map[string]any{"keys": []any{"k0", "k1"}}, sensitive: []string{"/keys/1"}, want: map[string]any{"keys": []any{"k0", values.Redacted}}},
		{name: "escaped key", v: map[string]any{"a/b": "s"}, sensitive: []string{"/a~1b"}, want: map[string]any{"a/b": values.Redacted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := values.DeepCopy(tt.v)
			got := values.Redact(tt.v, tt.sensitive)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Redact = %#v, want %#v", got, tt.want)
			}
			if !reflect.DeepEqual(tt.v, orig) {
				t.Errorf("Redact modified its input: %#v", tt.v)
			}
		})
	}
}

func TestIsSensitive(t *testing.T) {
	sensitive := []string{"/token", "/db/password"}
	tests := []struct {
		ptr  string
		want bool
	}{
		{ptr: "/token", want: true},
		{ptr: "/token/inner", want: true},
		{ptr: "/db/password", want: true},
		{ptr: "/db/password/0", want: true},
		{ptr: "/db", want: false},
		{ptr: "/db/user", want: false},
		{ptr: "/tokens", want: false}, // a prefix of the name is not the same field
		{ptr: "/db/passwordHint", want: false},
		{ptr: "", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.ptr, func(t *testing.T) {
			if got := values.IsSensitive(tt.ptr, sensitive); got != tt.want {
				t.Errorf("IsSensitive(%q) = %v, want %v", tt.ptr, got, tt.want)
			}
		})
	}
	if values.IsSensitive("/token", nil) {
		t.Error("IsSensitive with no sensitive pointers = true")
	}
}
