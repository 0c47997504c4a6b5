package expansion_test

import (
	"encoding/json"
	"regexp"
	"testing"
)

func matches(t testing.TB, re, s string) bool {
	t.Helper()
	ok, err := regexp.MatchString(re, s)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func show(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
