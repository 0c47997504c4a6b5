package controlplane

import (
	"strings"
	"testing"
)

// A /readyz answer of ~40 lines becomes the failed checks only: an error (and
// an interrupted up) says one line, not the endpoint's whole report.
func TestHealthSummary(t *testing.T) {
	var readyz strings.Builder
	for i := range 38 {
		readyz.WriteString("[+]poststarthook/check-" + strings.Repeat("x", i%5) + " ok\n")
	}
	readyz.WriteString("[-]etcd failed: reason withheld\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\nreadyz check failed\n")
	for _, tc := range []struct{ body, want string }{
		{readyz.String(), "failed: etcd failed: reason withheld; poststarthook/rbac/bootstrap-roles failed: reason withheld"},
		{"ok", "ok"},
		{"Forbidden\nmore\nlines", "Forbidden"},
		{strings.Repeat("y", 300), strings.Repeat("y", 200) + "…"},
	} {
		if got := healthSummary(tc.body); got != tc.want {
			t.Errorf("healthSummary(%.40q…) = %q, want %q", tc.body, got, tc.want)
		}
		if strings.Contains(healthSummary(tc.body), "\n") {
			t.Errorf("healthSummary(%.40q…) has more than one line", tc.body)
		}
	}
}
