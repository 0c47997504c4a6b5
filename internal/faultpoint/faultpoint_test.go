package faultpoint

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		name string
		n    int64
	}{
		{"", "", 0},
		{"apply:wave-start", "apply:wave-start", 1},
		{"apply:mid-wave:50", "apply:mid-wave", 50},
		{"apply:mid-wave:0", "apply:mid-wave:0", 1},
		{"apply:mid-wave:x", "apply:mid-wave:x", 1},
	} {
		name, n := parse(tc.in)
		if name != tc.name || n != tc.n {
			t.Errorf("parse(%q) = %q, %d; want %q, %d", tc.in, name, n, tc.name, tc.n)
		}
	}
}

// TestHitKills runs this test binary again with the variable set and checks that
// the child died of SIGKILL at the third hit, after printing the first two.
func TestHitKills(t *testing.T) {
	if os.Getenv("FAULTPOINT_CHILD") == "1" {
		for i := range 5 {
			Hit("other")
			Hit("point")
			os.Stdout.WriteString("survived " + string(rune('1'+i)) + "\n")
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHitKills$")
	cmd.Env = append(os.Environ(), "FAULTPOINT_CHILD=1", EnvVar+"=point:3")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child exited with %v, want SIGKILL; output:\n%s", err, out)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL", ws)
	}
	if got, want := string(out), "survived 1\nsurvived 2\n"; got != want {
		t.Errorf("child printed %q, want %q", got, want)
	}
}

func TestHitNoTarget(t *testing.T) {
	killed := 0
	old := kill
	kill = func() { killed++ }
	defer func() { kill = old }()
	// The target is read once per process; this process has none set.
	for range 3 {
		Hit("point")
	}
	if killed != 0 {
		t.Errorf("Hit killed %d times with %s unset", killed, EnvVar)
	}
}
