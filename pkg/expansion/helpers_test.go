package expansion_test

import (
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
