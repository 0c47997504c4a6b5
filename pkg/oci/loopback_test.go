package oci

import "testing"

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "localhost:5000": true, "LOCALHOST.": true, "reg.localhost:5000": true,
		"127.0.0.1": true, "127.0.0.1:5000": true, "127.1.2.3:80": true, "::1": true, "[::1]:5000": true,
		"registry.example.com": false, "registry.example.com:5000": false, "10.0.0.1:5000": false,
		"localhost.example.com": false, "128.0.0.1": false, "": false,
	} {
		if got := IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}
