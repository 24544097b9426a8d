// SPDX-License-Identifier: Apache-2.0

package tomltext

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// Pos is a 1-based line and column (in characters). The zero Pos means
// "the file as a whole".
type Pos struct{ Line, Col int }

// Source finds positions in a policy file's text. BurntSushi/toml keeps key
// positions unexported and only hints at them through its errors (a line
// that is right, a byte offset that is sometimes off by one, nothing for
// implicit tables), so the decoder takes the library's hint and confirms it
// against the text here.
type Source struct {
	Text       string
	lineStarts []int // byte offset of each line's first byte
	// last is the latest position at computed, at offset lastOff: the
	// next one on the same line counts characters from there, so that
	// the problems of a long one-line array cost linear time, not
	// quadratic.
	last    Pos
	lastOff int
}

func NewSource(text string) *Source {
	s := &Source{Text: text, lineStarts: []int{0}}
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			s.lineStarts = append(s.lineStarts, i+1)
		}
	}
	return s
}

// At converts a byte offset to a position.
func (s *Source) At(off int) Pos {
	off = max(0, min(off, len(s.Text)))
	line := sort.Search(len(s.lineStarts), func(i int) bool { return s.lineStarts[i] > off }) // first start after off
	start := s.lineStarts[line-1]
	p := Pos{Line: line}
	if s.last.Line == line && s.lastOff <= off && s.lastOff >= start {
		p.Col = s.last.Col + utf8.RuneCountInString(s.Text[s.lastOff:off])
	} else {
		p.Col = utf8.RuneCountInString(s.Text[start:off]) + 1
	}
	s.last, s.lastOff = p, off
	return p
}

// Line returns the byte range [start, end) of a 1-based Line, without its
// newline; ok is false for a Line that does not exist.
func (s *Source) Line(n int) (start, end int, ok bool) {
	if n < 1 || n > len(s.lineStarts) {
		return 0, 0, false
	}
	start = s.lineStarts[n-1]
	end = len(s.Text)
	if n < len(s.lineStarts) {
		end = s.lineStarts[n] - 1
	}
	return start, end, true
}

func IsBareKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// FindKey returns the byte offset of key written as a TOML key on the given
// line: bare or quoted, followed by "=", "." or "]". hint is the library's
// byte offset for the key's value or table; among several candidates the
// last one before hint wins (a value follows its key), else the first.
func (s *Source) FindKey(line, hint int, key string) (int, bool) {
	start, end, ok := s.Line(line)
	if !ok || key == "" {
		return 0, false
	}
	text := s.Text[start:end]
	var cands []int
	for _, form := range []string{key, `"` + key + `"`, "'" + key + "'"} {
		for i := 0; ; {
			j := strings.Index(text[i:], form)
			if j < 0 {
				break
			}
			j += i
			i = j + 1
			if form == key {
				if j > 0 && IsBareKeyChar(text[j-1]) || j+len(key) < len(text) && IsBareKeyChar(text[j+len(key)]) {
					continue
				}
			}
			rest := strings.TrimLeft(text[j+len(form):], " \t")
			if rest == "" || !strings.ContainsRune("=.]", rune(rest[0])) {
				continue
			}
			cands = append(cands, start+j)
		}
	}
	if len(cands) == 0 {
		return 0, false
	}
	sort.Ints(cands)
	best := cands[0]
	for _, c := range cands {
		if c < hint {
			best = c
		}
	}
	return best, true
}

// ValueAfter returns the byte offset of the value that follows the key at
// keyOff ("key = value"), or keyOff when the text is not of that shape.
func (s *Source) ValueAfter(keyOff int, key string) int {
	i := keyOff
	if i < len(s.Text) && (s.Text[i] == '"' || s.Text[i] == '\'') {
		i += len(key) + 2
	} else {
		i += len(key)
	}
	skip := func() {
		for i < len(s.Text) && (s.Text[i] == ' ' || s.Text[i] == '\t') {
			i++
		}
	}
	skip()
	if i >= len(s.Text) || s.Text[i] != '=' {
		return keyOff
	}
	i++
	skip()
	if i >= len(s.Text) || s.Text[i] == '\n' || s.Text[i] == '\r' {
		return keyOff
	}
	return i
}

// ArrayElems returns the byte offsets of the elements of the array whose
// "[" is at open. It understands strings, nested arrays and tables, commas
// and comments, which is all a valid array holds.
func (s *Source) ArrayElems(open int) []int {
	t := s.Text
	if open < 0 || open >= len(t) || t[open] != '[' {
		return nil
	}
	var elems []int
	i := open + 1
	for i < len(t) {
		switch c := t[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			i++
		case c == '#':
			for i < len(t) && t[i] != '\n' {
				i++
			}
		case c == ']':
			return elems
		default:
			elems = append(elems, i)
			i = s.SkipValue(i)
		}
	}
	return elems
}

// SkipValue returns the offset just after the value starting at i.
func (s *Source) SkipValue(i int) int {
	t := s.Text
	switch t[i] {
	case '"', '\'':
		q := t[i]
		if strings.HasPrefix(t[i:], strings.Repeat(string(q), 3)) {
			end := strings.Index(t[i+3:], strings.Repeat(string(q), 3))
			if end < 0 {
				return len(t)
			}
			return i + 3 + end + 3
		}
		for j := i + 1; j < len(t); j++ {
			if q == '"' && t[j] == '\\' {
				j++
				continue
			}
			if t[j] == q || t[j] == '\n' {
				return j + 1
			}
		}
		return len(t)
	case '[', '{':
		closer := byte(']')
		if t[i] == '{' {
			closer = '}'
		}
		j := i + 1
		for j < len(t) && t[j] != closer {
			switch t[j] {
			case '"', '\'', '[', '{':
				j = s.SkipValue(j)
			case '#':
				for j < len(t) && t[j] != '\n' {
					j++
				}
			default:
				j++
			}
		}
		return min(j+1, len(t))
	}
	j := i
	for j < len(t) && !strings.ContainsRune(",]}\n#", rune(t[j])) {
		j++
	}
	return max(j, i+1)
}
