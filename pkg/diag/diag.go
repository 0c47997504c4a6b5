package diag

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Severity says whether a diagnostic stops the run.
type Severity int

const (
	// Fatal stops the run once the current stage has finished across all plugins.
	Fatal Severity = iota
	// Warning is reported and the run goes on.
	Warning
	// Info is something a check could not do or chose not to (a kind lint
	// has no schema for): no problem found, but not a clean bill either.
	Info
)

// String returns "fatal", "warning" or "info".
func (s Severity) String() string {
	switch s {
	case Warning:
		return "warning"
	case Info:
		return "info"
	}
	return "fatal"
}

// MarshalText renders the severity as its name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Diagnostic is one problem, located as precisely as kubeplug knows.
type Diagnostic struct {
	Severity Severity `json:"severity"`
	// Plugin that the diagnostic concerns, if any.
	Plugin string `json:"plugin,omitempty"`
	// File, Line and Column locate the input; Line and Column are 1-based, 0 when unknown.
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
	// Field is the path of the field inside the file, for example spec.requires[0].version.
	Field string `json:"field,omitempty"`
	// Message says what was expected and what was found.
	Message string `json:"message"`
}

// String renders the diagnostic as `FILE:LINE:COL: field: message`, leaving out what is
// unknown, with a "warning: " or "info: " prefix on the message for warnings and info.
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.File != "" {
		b.WriteString(d.File)
		if d.Line > 0 {
			b.WriteString(":" + strconv.Itoa(d.Line))
			if d.Column > 0 {
				b.WriteString(":" + strconv.Itoa(d.Column))
			}
		}
		b.WriteString(": ")
	}
	switch d.Severity {
	case Warning:
		b.WriteString("warning: ")
	case Info:
		b.WriteString("info: ")
	}
	if d.Plugin != "" && d.File == "" {
		b.WriteString("plugin " + d.Plugin + ": ")
	}
	if d.Field != "" {
		b.WriteString(d.Field + ": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

// List is an ordered set of diagnostics.
type List []Diagnostic

// Errorf appends a fatal diagnostic with a formatted message.
func (l *List) Errorf(file string, line, col int, field, format string, args ...any) {
	*l = append(*l, Diagnostic{Severity: Fatal, File: file, Line: line, Column: col, Field: field, Message: fmt.Sprintf(format, args...)})
}

// Warnf appends a warning with a formatted message.
func (l *List) Warnf(file string, line, col int, field, format string, args ...any) {
	*l = append(*l, Diagnostic{Severity: Warning, File: file, Line: line, Column: col, Field: field, Message: fmt.Sprintf(format, args...)})
}

// Infof appends an info line with a formatted message.
func (l *List) Infof(file string, line, col int, field, format string, args ...any) {
	*l = append(*l, Diagnostic{Severity: Info, File: file, Line: line, Column: col, Field: field, Message: fmt.Sprintf(format, args...)})
}

// HasFatal reports whether any diagnostic is fatal.
func (l List) HasFatal() bool {
	return slices.ContainsFunc(l, func(d Diagnostic) bool { return d.Severity == Fatal })
}

// Fatal returns only the fatal diagnostics.
func (l List) Fatal() List {
	return slices.DeleteFunc(slices.Clone(l), func(d Diagnostic) bool { return d.Severity != Fatal })
}

// Warnings returns only the warnings.
func (l List) Warnings() List {
	return slices.DeleteFunc(slices.Clone(l), func(d Diagnostic) bool { return d.Severity != Warning })
}

// Sort orders diagnostics by file, line, column, field and message, so output is
// deterministic however they were found.
func (l List) Sort() {
	slices.SortStableFunc(l, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column),
			cmp.Compare(a.Field, b.Field),
			cmp.Compare(a.Message, b.Message),
		)
	})
}

// Err returns nil when the list has no fatal diagnostic, and an *Error otherwise.
func (l List) Err() error {
	if !l.HasFatal() {
		return nil
	}
	return &Error{List: l.Fatal()}
}

// String renders one diagnostic per line.
func (l List) String() string {
	lines := make([]string, len(l))
	for i, d := range l {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// Error carries fatal diagnostics through code that returns an error. Callers that
// want every problem use errors.As to get the list.
type Error struct {
	List List
}

func (e *Error) Error() string { return e.List.String() }

// MarshalJSON renders the error as its list.
func (e *Error) MarshalJSON() ([]byte, error) { return json.Marshal(e.List) }

// FromError returns the diagnostics carried by err, or one diagnostic holding its
// message when err carries none.
func FromError(err error) List {
	if err == nil {
		return nil
	}
	if de, ok := errors.AsType[*Error](err); ok {
		return de.List
	}
	return List{{Severity: Fatal, Message: err.Error()}}
}
