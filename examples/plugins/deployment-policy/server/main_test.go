package main

import "testing"

func TestImageTag(t *testing.T) {
	for image, want := range map[string]bool{
		"nginx:1.27":                   true,
		"nginx":                        false,
		"nginx:latest":                 false,
		"registry:5000/nginx":          false,
		"registry:5000/team/nginx:1.2": true,
		"nginx@sha256:0123":            true,
	} {
		tag, ok := imageTag(image)
		if got := ok && tag != "latest"; got != want {
			t.Errorf("%s: versioned = %v, want %v", image, got, want)
		}
	}
}
