package proc

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestStderr(t *testing.T) {
	var logs bytes.Buffer
	s := NewStderr(slog.New(slog.NewTextHandler(&logs, nil)), "p", "stage", "render")
	fmt.Fprint(s, "panic: oh no\n")
	for i := range 30 {
		fmt.Fprintf(s, "frame %d\n", i)
	}
	fmt.Fprint(s, "partial")
	tail := s.Tail()
	lines := strings.Split(tail, "\n")
	if lines[0] != "panic: oh no" || lines[1] != "..." || lines[len(lines)-1] != "partial" {
		t.Errorf("tail =\n%s", tail)
	}
	if n := len(lines) - 2; n != tailLines {
		t.Errorf("tail has %d lines, want %d", n, tailLines)
	}
	if !strings.Contains(logs.String(), `msg="plugin stderr" plugin=p stage=render line="frame 29"`) {
		t.Errorf("log:\n%s", logs.String())
	}
	s.Reset()
	fmt.Fprint(s, strings.Repeat("x", 3*tailBytes)+"\n")
	if got := s.Tail(); len(got) > tailBytes+3 {
		t.Errorf("tail of one long line is %d bytes", len(got))
	}
	if got := WithTail("failed", "a\nb"); got != "failed; stderr:\n    a\n    b" {
		t.Errorf("WithTail = %q", got)
	}
}
