// SPDX-License-Identifier: Apache-2.0

package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/macake/macake/internal/lazyregexp"
)

// unquotedValue is a line like `download = 100mbit`: a value with a unit,
// which TOML reads only as a string, written without the quotes.
type unquotedValue struct {
	line       int
	table      toml.Key // the table the line is in (nil: the top level)
	tableKnown bool     // false after a table header that could not be read
	key        string   // as written, e.g. "download" or "shaper.download"
	value      string   // as written, e.g. "100mbit"
	start, end int      // byte offsets of the value in the text
}

var (
	// keyPart is a bare key, or dotted bare keys.
	keyPart = `[A-Za-z0-9_-]+(?:[ \t]*\.[ \t]*[A-Za-z0-9_-]+)*`
	// unquotedRE matches `key = <number><letters>`, with an optional
	// space before the unit ("1.5 Mbit/s") and an optional comment.
	unquotedRE = lazyregexp.New(`^[ \t]*(` + keyPart + `)[ \t]*=[ \t]*([0-9][0-9._]*[ \t]*[A-Za-z][A-Za-z/]*)[ \t]*(?:#.*)?$`)
	// tomlIntegerRE matches the integers TOML itself writes with letters.
	tomlIntegerRE = lazyregexp.New(`^0(?:x[0-9A-Fa-f_]+|o[0-7_]+|b[01_]+)$`)
	tableRE       = lazyregexp.New(`^[ \t]*\[\[?[ \t]*(` + keyPart + `)[ \t]*\]\]?[ \t]*(?:#.*)?$`)
)

// splitKey splits a dotted bare key as written into its parts.
func splitKey(s string) toml.Key {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// findUnquoted returns the lines of text that hold a bare value with a
// unit, outside strings and values that span lines (arrays, inline
// tables), in order. Every such line is a TOML syntax error.
func findUnquoted(text string) []unquotedValue {
	var out []unquotedValue
	var sc tomlLineScanner
	table, tableKnown := toml.Key(nil), true
	start := 0
	for n := 1; start <= len(text); n++ {
		end := strings.IndexByte(text[start:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += start
		}
		line := strings.TrimSuffix(text[start:end], "\r")
		if sc.atTopLevel() {
			if m := unquotedRE.FindStringSubmatchIndex(line); m != nil && !tomlIntegerRE.MatchString(line[m[4]:m[5]]) {
				out = append(out, unquotedValue{line: n, table: table, tableKnown: tableKnown,
					key: line[m[2]:m[3]], value: line[m[4]:m[5]], start: start + m[4], end: start + m[5]})
			}
			if trimmed := strings.TrimLeft(line, " \t"); strings.HasPrefix(trimmed, "[") {
				// A table header: not scanned for brackets, so that a
				// broken one does not hide the rest of the file.
				m := tableRE.FindStringSubmatch(line)
				table, tableKnown = nil, m != nil
				if m != nil {
					table = splitKey(m[1])
				}
				start = end + 1
				continue
			}
		}
		sc.scan(line)
		start = end + 1
	}
	return out
}

// tomlLineScanner follows, line by line, whether the text is inside a
// multi-line string or an unclosed array or inline table: only lines
// outside them start with a key.
type tomlLineScanner struct {
	multiline string // `"""` or `'''` while inside one
	depth     int    // open [ and {
}

func (s *tomlLineScanner) atTopLevel() bool { return s.multiline == "" && s.depth == 0 }

func (s *tomlLineScanner) scan(line string) {
	for i := 0; i < len(line); {
		if s.multiline != "" {
			j := indexClosing(line[i:], s.multiline)
			if j < 0 {
				return
			}
			i += j + len(s.multiline)
			s.multiline = ""
			continue
		}
		switch c := line[i]; c {
		case '#':
			return
		case '"', '\'':
			q := string(c)
			if strings.HasPrefix(line[i:], q+q+q) {
				s.multiline = q + q + q
				i += 3
				continue
			}
			j := indexClosing(line[i+1:], q)
			if j < 0 {
				return // unterminated: the string ends with the line
			}
			i += 1 + j + 1
			continue
		case '[', '{':
			s.depth++
		case ']', '}':
			if s.depth > 0 {
				s.depth--
			}
		}
		i++
	}
}

// indexClosing returns the index of the quote that closes a string in s,
// skipping backslash escapes in basic strings, or -1.
func indexClosing(s, quote string) int {
	for i := 0; i < len(s); i++ {
		if quote[0] == '"' && s[i] == '\\' {
			i++
			continue
		}
		if strings.HasPrefix(s[i:], quote) {
			return i
		}
	}
	return -1
}

// quoteValues returns text with each unquoted value put in quotes as
// written, so that it parses and each value gets its usual checks.
func quoteValues(text string, us []unquotedValue) string {
	var b strings.Builder
	b.Grow(len(text) + 2*len(us))
	last := 0
	for _, u := range us {
		b.WriteString(text[last:u.start])
		b.WriteString(`"` + u.value + `"`)
		last = u.end
	}
	b.WriteString(text[last:])
	return b.String()
}

// schemaType returns the type of the schema field at path, or nil.
func schemaType(t reflect.Type, path toml.Key) reflect.Type {
	for _, name := range path {
		if t.Kind() != reflect.Struct || isLeaf(t) {
			return nil
		}
		fields, _ := tomlFields(t)
		i, ok := fields[name]
		if !ok {
			return nil
		}
		t = t.Field(i).Type
	}
	return t
}

// unquotedProblem says how to write u: in quotes, with a corrected unit
// when the one written is wrong, or as a plain number when the key takes
// one.
func (d *decoder) unquotedProblem(u unquotedValue) *Problem {
	name := u.key
	var t reflect.Type
	if u.tableKnown {
		path := append(append(toml.Key{}, u.table...), splitKey(u.key)...)
		name = path.String()
		t = schemaType(d.schema, path)
	}
	at := d.src.at(u.start)
	msg := fmt.Sprintf("write the value in quotes: %s = %q", u.key, u.value)
	switch {
	case t == nil:
	case t == reflect.TypeFor[Overhead]():
		// A number of bytes, unless it is a keyword (which needs quotes).
		if num, _, err := splitNumber(u.value); err == nil && num != "" {
			msg = fmt.Sprintf("takes a plain number, without a unit or quotes: %s = %s", u.key, num)
		}
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(u.value))
		var hint *unitHint
		switch {
		case errors.As(err, &hint):
			msg = fmt.Sprintf("write the value in quotes: %s = %q; %s", u.key, hint.fix, hint.reason)
		case err != nil:
			msg += "; also, " + err.Error()
		}
	case t.Kind() == reflect.Int || t.Kind() == reflect.Float64:
		num, _, _ := splitNumber(u.value)
		msg = fmt.Sprintf("takes a plain number, without a unit or quotes: %s = %s", u.key, num)
	}
	return &Problem{File: d.file, Line: at.line, Col: at.col, Message: name + ": " + msg}
}
