package controlplane

import (
	"slices"
	"testing"
)

func TestBuildArgs(t *testing.T) {
	defaults := []flag{{"secure-port", "6443"}, {"profiling", "false"}}
	tests := []struct {
		name      string
		overrides map[string]string
		gates     map[string]bool
		want      []string
	}{
		{"defaults only", nil, nil, []string{"--secure-port=6443", "--profiling=false"}},
		{
			"override keeps position, extras sorted, dashes optional",
			map[string]string{"profiling": "true", "--z-flag": "1", "audit-log-path": "-"},
			nil,
			[]string{"--secure-port=6443", "--profiling=true", "--audit-log-path=-", "--z-flag=1"},
		},
		{
			"feature gates sorted",
			nil,
			map[string]bool{"B": false, "A": true},
			[]string{"--secure-port=6443", "--profiling=false", "--feature-gates=A=true,B=false"},
		},
		{
			"explicit feature-gates flag wins over gates",
			map[string]string{"feature-gates": "C=true"},
			map[string]bool{"A": true},
			[]string{"--secure-port=6443", "--profiling=false", "--feature-gates=C=true"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildArgs(defaults, tt.overrides, tt.gates)
			if !slices.Equal(got, tt.want) {
				t.Errorf("buildArgs() = %q, want %q", got, tt.want)
			}
		})
	}
}
