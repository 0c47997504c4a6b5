package livetest

import (
	"slices"
	"testing"
)

func TestScreen(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		lines []string
	}{
		{"text and newlines", "a\r\nbc\r\n", []string{"a", "bc"}},
		{"carriage return overwrites", "hello\rJ", []string{"Jello"}},
		{"wrap at the margin", "abcdefghij12", []string{"abcdefghij", "12"}},
		{"up and erase down", "log\r\nbar1\r\nbar2\r\n\x1b[2A\x1b[Jnew\r\n", []string{"log", "new"}},
		{"erase line", "abcdef\r\x1b[2C\x1b[K", []string{"ab"}},
		{"colours ignored", "\x1b[32mok\x1b[0m", []string{"ok"}},
		{"split escape", "a\x1b", []string{"a"}},
		{"scroll keeps history", "1\r\n2\r\n3\r\n4\r\n5", []string{"1", "2", "3", "4", "5"}},
		{"cursor position", "\x1b[2;3Hx", []string{"", "  x"}},
		{"wide rune", "✓ ok", []string{"✓ ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScreen(10, 3)
			_, _ = s.Write([]byte(tt.in))
			if got := s.Lines(); !slices.Equal(got, tt.lines) {
				t.Errorf("lines %q, want %q", got, tt.lines)
			}
		})
	}
}

// TestScreenSplitWrites: a sequence or rune split across writes is applied
// whole.
func TestScreenSplitWrites(t *testing.T) {
	s := NewScreen(20, 3)
	for _, part := range []string{"ab\r\ncd\x1b", "[1", "A\x1b[J", "\xe2\x9c", "\x93"} {
		_, _ = s.Write([]byte(part))
	}
	if got, want := s.Lines(), []string{"ab✓"}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}
