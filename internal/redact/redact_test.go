package redact

import (
	"encoding/base64"
	"errors"
	"testing"
)

func TestString(t *testing.T) {
	s := New("hunter2-pw", "no", "hunter2-pw-longer", `q"uote`)
	for _, tc := range []struct{ in, want string }{
		{"pw=hunter2-pw.", "pw=***."},
		{"long hunter2-pw-longer", "long ***"},
		{"b64 " + base64.StdEncoding.EncodeToString([]byte("hunter2-pw")), "b64 ***"},
		{"url " + base64.RawURLEncoding.EncodeToString([]byte("hunter2-pw-longer")), "url ***"},
		{`json "q\"uote"`, `json "***"`},
		{"short no stays", "short no stays"},
	} {
		if got := s.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var none *Secrets
	if got := none.String("hunter2-pw"); got != "hunter2-pw" {
		t.Errorf("nil set changed text: %q", got)
	}
	base := errors.New("failed: hunter2-pw")
	if err := s.Error(base); err.Error() != "failed: ***" || !errors.Is(err, base) {
		t.Errorf("Error = %v", err)
	}
	if w := s.Without(New("hunter2-pw")); w.Len() != 2 {
		t.Errorf("Without kept %v", w.Values())
	}
}

func TestJSON(t *testing.T) {
	type doc struct{ A, B string }
	in := &doc{A: "x hunter2-pw", B: "clear"}
	out, err := JSON(New("hunter2-pw"), in)
	if err != nil || out.A != "x ***" || out.B != "clear" || in.A != "x hunter2-pw" {
		t.Errorf("JSON = %+v, %v (input %+v)", out, err, in)
	}
	if same, _ := JSON(New("absent"), in); same != in {
		t.Error("JSON copied a value with nothing to mask")
	}
}
