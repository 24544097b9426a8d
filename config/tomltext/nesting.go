// SPDX-License-Identifier: Apache-2.0

package tomltext

import "fmt"

// MaxNesting is how deep tables, arrays and dotted keys may nest in a
// policy or settings file: the deepest value a policy needs is at level 3
// (`[autorate]`, `download = { min = … }`). The TOML library takes time
// quadratic in the depth (a 16 KB file of nested inline tables took 31 s),
// so deeper files are refused before they are decoded.
const MaxNesting = 16

// MaxKeys is how many keys and table headers a policy or settings file may
// hold; a policy has about 20. The decoder learns each key's position from
// an error the library builds from a copy of the whole file, so its time
// grows with keys × size (16,000 keys in 165 KB took 18 s): more are
// refused before they are decoded.
const MaxKeys = 256

// nestingScan is a linear pass over a TOML text that finds how deep its
// values nest and how many keys it has, without decoding it: it follows
// strings, comments, table headers, dotted keys, arrays and inline tables,
// and nothing else. It needs to be right only for files that are valid
// TOML; for the others the parser reports the syntax error, as long as the
// scan ends, which it always does in one pass.
type nestingScan struct {
	text  string
	i     int
	stack []nestFrame
}

// nestFrame is one open container: the root table (kind 0, its level set
// by the last [header]), an array '[' or an inline table '{'.
type nestFrame struct {
	kind  byte
	level int
}

// textShape is what the scan found.
type textShape struct {
	// deepest is the deepest level, keys the number of keys and headers.
	deepest, keys int
	// overAt is the byte offset where a limit is first exceeded, -1 if
	// none is; problem then says which and how.
	overAt  int
	problem string
}

// TooComplex returns where and how text exceeds MaxNesting or MaxKeys;
// ok is false when it stays within both.
func TooComplex(text string) (off int, problem string, ok bool) {
	sh := scanShape(text)
	return sh.overAt, sh.problem, sh.overAt >= 0
}

// scanShape scans text. A value's level counts the tables and arrays
// around it: `a = 1` is at 1, `[x.y]` then `k = 1` at 3, and
// `a = {b = [[1]]}` puts the inner array at 3 (scalars in an array do not
// count as a level of their own). The scan stops at the first limit
// exceeded.
func scanShape(text string) (sh textShape) {
	sh.overAt = -1
	see := func(at, level int) {
		sh.deepest = max(sh.deepest, level)
		if level > MaxNesting && sh.overAt < 0 {
			sh.overAt = at
			sh.problem = fmt.Sprintf("nests tables and arrays %d levels deep here; macake reads at most %d (a policy needs 3): flatten it", level, MaxNesting)
		}
	}
	key := func(at int) {
		sh.keys++
		if sh.keys > MaxKeys && sh.overAt < 0 {
			sh.overAt = at
			sh.problem = fmt.Sprintf("has more than %d keys and tables (a policy has about 20): this is not a policy file", MaxKeys)
		}
	}
	s := nestingScan{text: text, stack: []nestFrame{{}}}
	keyMode, keyStart, parts := true, -1, 1
	blank := true // only blanks so far on this line
	pending := 0  // the level of a container that would open next, in value mode
	for s.i < len(text) && sh.overAt < 0 {
		c := text[s.i]
		top := s.stack[len(s.stack)-1]
		atStart := blank
		blank = blank && (c == ' ' || c == '\t') || c == '\n'
		switch {
		case c == '#':
			for s.i < len(text) && text[s.i] != '\n' {
				s.i++
			}
			continue
		case c == '"' || c == '\'':
			if keyMode && keyStart < 0 {
				keyStart = s.i
			}
			s.skipString()
			continue
		case c == '\n':
			if top.kind == 0 {
				keyMode, keyStart, parts = true, -1, 1
			}
		case keyMode && c == '[' && top.kind == 0 && atStart:
			start := s.i
			level := s.header()
			key(start)
			see(start, level)
			s.stack[0].level = level
			continue
		case keyMode && c == '.':
			parts++
		case keyMode && c == '=':
			pending = top.level + parts
			key(max(keyStart, 0))
			see(max(keyStart, 0), pending)
			keyMode = false
		case c == '}' && top.kind == '{', c == ']' && top.kind == '[' && !keyMode:
			s.stack = s.stack[:len(s.stack)-1]
			keyMode = false
		case keyMode:
			if keyStart < 0 && c != ' ' && c != '\t' && c != '\r' && c != ',' {
				keyStart = s.i
			}
		case c == '[' || c == '{':
			level := pending
			if top.kind == '[' {
				level = top.level + 1 // an element of the array
			}
			see(s.i, level)
			s.stack = append(s.stack, nestFrame{kind: c, level: level})
			if c == '{' {
				keyMode, keyStart, parts = true, -1, 1
			}
		case c == ',' && top.kind == '{':
			keyMode, keyStart, parts = true, -1, 1
		}
		s.i++
	}
	return sh
}

// header reads a [table] or [[array.of.tables]] header at s.i and returns
// the level of the keys under it: one per dotted part, one more for an
// array of tables.
func (s *nestingScan) header() int {
	level := 1
	s.i++
	if s.i < len(s.text) && s.text[s.i] == '[' {
		level++
		s.i++
	}
	for s.i < len(s.text) {
		switch c := s.text[s.i]; c {
		case '"', '\'':
			s.skipString()
			continue
		case '.':
			level++
		case ']', '\n':
			return level
		}
		s.i++
	}
	return level
}

// skipString moves s.i past the string starting there: basic, literal or
// their multi-line forms. An unterminated one ends at the line's end (or
// the text's, for a multi-line one).
func (s *nestingScan) skipString() {
	q := s.text[s.i]
	if s.i+2 < len(s.text) && s.text[s.i+1] == q && s.text[s.i+2] == q {
		s.i += 3
		for s.i < len(s.text) {
			switch {
			case q == '"' && s.text[s.i] == '\\':
				s.i += 2
			case s.text[s.i] == q && s.i+2 < len(s.text) && s.text[s.i+1] == q && s.text[s.i+2] == q:
				s.i += 3
				// Up to two more quotes belong to the string.
				for n := 0; n < 2 && s.i < len(s.text) && s.text[s.i] == q; n++ {
					s.i++
				}
				return
			default:
				s.i++
			}
		}
		return
	}
	s.i++
	for s.i < len(s.text) {
		switch c := s.text[s.i]; {
		case c == '\n':
			return
		case q == '"' && c == '\\':
			s.i += 2
		case c == q:
			s.i++
			return
		default:
			s.i++
		}
	}
}
