// SPDX-License-Identifier: Apache-2.0

package config

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-multierror"

	"github.com/macake/macake/config/tomltext"
	"github.com/macake/macake/diag"
)

// Problem is one error in a configuration file, at a position. Line and
// Col are 1-based; both are 0 for a problem with the file as a whole (it
// cannot be read, or its ownership or mode is unsafe). Its JSON form is
// its Diagnostic.
type Problem struct {
	File    string
	Line    int
	Col     int
	Message string
}

// MarshalJSON writes the problem's Diagnostic.
func (p *Problem) MarshalJSON() ([]byte, error) { return json.Marshal(p.Diagnostic()) }

// Diagnostic is the problem in the JSON form every document uses; it
// implements diag.Diagnoser, so an error that wraps a Problem keeps its
// position in JSON.
func (p *Problem) Diagnostic() diag.Diagnostic {
	return diag.Diagnostic{File: p.File, Line: max(p.Line, 0), Column: p.column(), Message: p.Message}
}

// column is the 1-based column of a problem with a line, 0 without one.
func (p *Problem) column() int {
	if p.Line <= 0 {
		return 0
	}
	return max(p.Col, 1)
}

// Error returns "FILE:LINE:COL: message", or "FILE: message" without a
// position.
func (p *Problem) Error() string { return p.Diagnostic().String() }

// Warning is something worth fixing that does not stop a policy from
// loading, in caddy's Warning{File, Line, Message} shape (plus a column).
type Warning struct {
	File    string
	Line    int
	Col     int
	Message string
}

// MarshalJSON writes the warning's Diagnostic.
func (w Warning) MarshalJSON() ([]byte, error) { return json.Marshal(w.Diagnostic()) }

// Diagnostic is the warning in the JSON form every document uses.
func (w Warning) Diagnostic() diag.Diagnostic {
	p := Problem(w)
	return p.Diagnostic()
}

// String returns "FILE:LINE:COL: warning: message".
func (w Warning) String() string {
	if w.Line <= 0 {
		return w.File + ": warning: " + w.Message
	}
	return fmt.Sprintf("%s:%d:%d: warning: %s", w.File, w.Line, max(w.Col, 1), w.Message)
}

// Problems returns every Problem inside err (as returned by Load, LoadFile,
// Parse, DecodeStrict or settings.LoadDaemon), in report order. Errors that
// are not Problems are wrapped into one without a position, so nothing is
// lost.
func Problems(err error) []*Problem {
	if err == nil {
		return nil
	}
	var errs []error
	var m *multierror.Error
	if errors.As(err, &m) {
		errs = m.Errors
	} else {
		errs = []error{err}
	}
	out := make([]*Problem, 0, len(errs))
	for _, e := range errs {
		var p *Problem
		if errors.As(e, &p) {
			out = append(out, p)
		} else {
			out = append(out, &Problem{Message: e.Error()})
		}
	}
	return out
}

// problemList collects problems and warnings while loading.
type problemList struct {
	problems []*Problem
	warnings []Warning
}

func (l *problemList) add(file string, p tomltext.Pos, format string, args ...any) {
	l.problems = append(l.problems, &Problem{File: Printable(file), Line: p.Line, Col: p.Col, Message: Printable(fmt.Sprintf(format, args...))})
}

func (l *problemList) warn(file string, p tomltext.Pos, format string, args ...any) {
	l.warnings = append(l.warnings, Warning{File: Printable(file), Line: p.Line, Col: p.Col, Message: Printable(fmt.Sprintf(format, args...))})
}

// Printable returns s with every control character, invalid byte and
// bidirectional override escaped as in a Go string literal (\n, \x1b,
// \u202e), and unchanged when it has none. Every problem and warning goes
// through it: their texts quote the files' values and names, and a value
// holding a newline could print a fake "ok:" line, an escape sequence
// could drive the terminal, and an override could make text read
// backwards.
func Printable(s string) string {
	if strings.IndexFunc(s, needsEscape) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && strings.HasPrefix(s[i:], "\xef\xbf\xbd"):
			b.WriteRune(r) // a real U+FFFD
		case r == utf8.RuneError:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case needsEscape(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsEscape(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// err returns the problems as one error that prints one line per problem,
// or nil. It never returns a typed nil.
func (l *problemList) err(order map[string]int) error {
	if len(l.problems) == 0 {
		return nil
	}
	ps := slices.Clone(l.problems)
	sortByPosition(ps, order, func(p *Problem) (string, int, int) { return p.File, p.Line, p.Col })
	var m *multierror.Error
	for _, p := range ps {
		m = multierror.Append(m, p)
	}
	m.ErrorFormat = oneLinePerError
	return m.ErrorOrNil()
}

// sortedWarnings returns the warnings in report order.
func (l *problemList) sortedWarnings(order map[string]int) []Warning {
	ws := slices.Clone(l.warnings)
	sortByPosition(ws, order, func(w Warning) (string, int, int) { return w.File, w.Line, w.Col })
	return ws
}

// sortByPosition orders by file (in load order, then by name), line and
// column; the sort is stable so problems at one position keep their order.
func sortByPosition[T any](s []T, order map[string]int, key func(T) (string, int, int)) {
	slices.SortStableFunc(s, func(a, b T) int {
		fa, la, ca := key(a)
		fb, lb, cb := key(b)
		oa, okA := order[fa]
		ob, okB := order[fb]
		if okA && okB && oa != ob {
			return cmp.Compare(oa, ob)
		}
		return cmp.Or(cmp.Compare(fa, fb), cmp.Compare(la, lb), cmp.Compare(ca, cb))
	})
}

// oneLinePerError replaces go-multierror's default text ("2 errors
// occurred:\n\t* …\n\n") with one problem per line and no trailing newline.
func oneLinePerError(es []error) string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}
