package controlplane

import "testing"

// TestFirstIP: the API server's certificate names the first address of the
// Service range, the "kubernetes" Service's.
func TestFirstIP(t *testing.T) {
	for cidr, want := range map[string]string{
		"10.96.0.0/12":  "10.96.0.1",
		"10.100.0.0/16": "10.100.0.1",
		"fd00:10::/108": "fd00:10::1",
	} {
		got, err := firstIP(cidr)
		if err != nil || got.String() != want {
			t.Errorf("firstIP(%s) = %v, %v; want %s", cidr, got, err, want)
		}
	}
	if _, err := firstIP("10.96.0.0"); err == nil {
		t.Error("firstIP of an address without a prefix length: no error")
	}
}
