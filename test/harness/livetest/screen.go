package livetest

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
)

// Screen is a terminal screen of fixed size that applies what is written to it:
// printable text (wrapping at the right margin), CR, LF, BS, TAB and the CSI
// sequences a progress display uses (cursor up, down, forward, back, to column,
// to position; erase in display and in line). Colours and other modes are
// accepted and ignored. Lines scrolled off the top are kept in the history.
type Screen struct {
	mu            sync.Mutex
	width, height int
	rows          [][]rune
	history       []string
	x, y          int
	// wrapNext is the pending wrap after writing the last column.
	wrapNext bool
	// pending holds an incomplete escape sequence or UTF-8 rune.
	pending []byte
	// raw is every byte written.
	raw []byte
}

// NewScreen returns an empty screen of width columns and height rows.
func NewScreen(width, height int) *Screen {
	s := &Screen{width: width, height: height}
	for range height {
		s.rows = append(s.rows, s.blank())
	}
	return s
}

func (s *Screen) blank() []rune {
	r := make([]rune, s.width)
	for i := range r {
		r[i] = ' '
	}
	return r
}

// Write applies b. It never fails.
func (s *Screen) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw = append(s.raw, b...)
	buf := append(s.pending, b...)
	s.pending = nil
	for len(buf) > 0 {
		c := buf[0]
		switch {
		case c == 0x1b:
			n := s.escape(buf)
			if n == 0 {
				s.pending = append([]byte(nil), buf...)
				return len(b), nil
			}
			buf = buf[n:]
			continue
		case c == '\r':
			s.x, s.wrapNext = 0, false
		case c == '\n':
			s.lineFeed()
		case c == '\b':
			if s.x > 0 {
				s.x--
			}
			s.wrapNext = false
		case c == '\t':
			s.x = min((s.x/8+1)*8, s.width-1)
		case c < 0x20 || c == 0x7f:
			// other controls: ignored
		default:
			if !utf8.FullRune(buf) {
				s.pending = append([]byte(nil), buf...)
				return len(b), nil
			}
			r, n := utf8.DecodeRune(buf)
			s.put(r)
			buf = buf[n:]
			continue
		}
		buf = buf[1:]
	}
	return len(b), nil
}

func (s *Screen) put(r rune) {
	w := runewidth.RuneWidth(r)
	if w == 0 {
		return
	}
	if s.wrapNext || s.x+w > s.width {
		s.x = 0
		s.lineFeed()
	}
	s.rows[s.y][s.x] = r
	for i := 1; i < w && s.x+i < s.width; i++ {
		s.rows[s.y][s.x+i] = 0 // the right half of a wide rune
	}
	s.x += w
	if s.x >= s.width {
		s.x, s.wrapNext = s.width-1, true
	}
}

func (s *Screen) lineFeed() {
	s.wrapNext = false
	if s.y < s.height-1 {
		s.y++
		return
	}
	s.history = append(s.history, rowString(s.rows[0]))
	s.rows = append(s.rows[1:], s.blank())
}

// escape applies the escape sequence at the start of b and returns its length,
// or 0 when b holds only part of one.
//
// Branches: one case per escape sequence the emulated terminal understands, as a
// terminal's own parser is written.
func (s *Screen) escape(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	if b[1] != '[' {
		return 2 // a two-byte escape (ESC 7, ESC 8, ...): ignored
	}
	i := 2
	for i < len(b) && (b[i] < 0x40 || b[i] > 0x7e) {
		i++
	}
	if i == len(b) {
		return 0
	}
	params, final := string(b[2:i]), b[i]
	if strings.HasPrefix(params, "?") {
		return i + 1 // private modes (cursor visibility...): ignored
	}
	args := strings.Split(params, ";")
	arg := func(k, def int) int {
		if k < len(args) {
			if n, err := strconv.Atoi(args[k]); err == nil {
				return n
			}
		}
		return def
	}
	s.wrapNext = false
	switch final {
	case 'A':
		s.y = max(s.y-max(arg(0, 1), 1), 0)
	case 'B':
		s.y = min(s.y+max(arg(0, 1), 1), s.height-1)
	case 'C':
		s.x = min(s.x+max(arg(0, 1), 1), s.width-1)
	case 'D':
		s.x = max(s.x-max(arg(0, 1), 1), 0)
	case 'G':
		s.x = min(max(arg(0, 1), 1), s.width) - 1
	case 'H', 'f':
		s.y = min(max(arg(0, 1), 1), s.height) - 1
		s.x = min(max(arg(1, 1), 1), s.width) - 1
	case 'J':
		switch arg(0, 0) {
		case 0:
			s.eraseLine(s.x, s.width)
			for y := s.y + 1; y < s.height; y++ {
				s.rows[y] = s.blank()
			}
		case 1:
			for y := 0; y < s.y; y++ {
				s.rows[y] = s.blank()
			}
			s.eraseLine(0, s.x+1)
		default:
			for y := range s.rows {
				s.rows[y] = s.blank()
			}
		}
	case 'K':
		switch arg(0, 0) {
		case 0:
			s.eraseLine(s.x, s.width)
		case 1:
			s.eraseLine(0, s.x+1)
		default:
			s.eraseLine(0, s.width)
		}
	}
	return i + 1
}

func (s *Screen) eraseLine(from, to int) {
	for x := from; x < to && x < s.width; x++ {
		s.rows[s.y][x] = ' '
	}
}

func rowString(r []rune) string {
	var b strings.Builder
	for _, c := range r {
		if c != 0 {
			b.WriteRune(c)
		}
	}
	return strings.TrimRight(b.String(), " ")
}

// Lines are the history and the screen's rows, without the blank rows at the
// bottom: what a person scrolling back sees.
func (s *Screen) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string(nil), s.history...)
	for _, r := range s.rows {
		out = append(out, rowString(r))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// Visible is the screen's rows without the blank ones at the bottom: what a
// person sees now.
func (s *Screen) Visible() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.rows {
		out = append(out, rowString(r))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// String is Lines joined by newlines.
func (s *Screen) String() string { return strings.Join(s.Lines(), "\n") }

// Written is how many bytes were written.
func (s *Screen) Written() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.raw)
}

// Raw is every byte written, escape sequences and all.
func (s *Screen) Raw() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.raw...)
}
