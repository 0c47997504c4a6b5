package local

import (
	"errors"
	"strings"
	"testing"

	"github.com/kubeplug/kubeplug/pkg/provider"
)

// TestCheckVersionChange: the same version or none recorded is no upgrade, a
// higher patch or the next minor is one, a lower version and a skipped minor
// are refused naming what the cluster runs.
func TestCheckVersionChange(t *testing.T) {
	for _, tc := range []struct {
		was, now string
		upgrade  bool
		err      string
	}{
		{was: "", now: "1.37.1"},
		{was: "1.37.1", now: "v1.37.1"},
		{was: "1.36.3", now: "1.37.1", upgrade: true},
		{was: "1.37.0", now: "1.37.1", upgrade: true},
		{was: "1.37.1", now: "1.36.3", err: "cluster c runs Kubernetes 1.37.1; a downgrade is not supported"},
		{was: "1.35.2", now: "1.37.1", err: "cluster c runs Kubernetes 1.35.2; an upgrade moves one minor version at a time (Kubernetes' version skew policy): upgrade to 1.36 first"},
		{was: "1.37.1", now: "2.0.0", err: "upgrade to 1.38 first"},
		{was: "junk", now: "1.37.1", err: `runs Kubernetes "junk", which kubeplug cannot compare`},
	} {
		t.Run(tc.was+"->"+tc.now, func(t *testing.T) {
			upgrade, err := checkVersionChange("c", tc.was, tc.now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, provider.ErrUnsupportedVersion) {
					t.Fatalf("err = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || upgrade != tc.upgrade {
				t.Fatalf("checkVersionChange = %v, %v; want %v", upgrade, err, tc.upgrade)
			}
		})
	}
}
