// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/macake/macake/internal/lazyregexp"
)

// The C library behaviours dnctl's parsing rests on, reproduced exactly:
// strtoul with base 0 (octal, hex, saturation), atoi, strtod's prefix
// parsing, and Apple's err/warn output format.

// strtoul parses like C's strtoul(s, &end, base) and returns the value and
// the unparsed rest (the whole string when no digit was read).
func strtoul(s string, base int) (uint64, string) {
	i, neg := skipSpaceAndSign(s)
	if (base == 0 || base == 16) && i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && digitValue(s[i+2]) < 16 {
		i += 2
		base = 16
	} else if base == 0 {
		if i < len(s) && s[i] == '0' {
			base = 8
		} else {
			base = 10
		}
	}
	start := i
	var v uint64
	overflow := false
	for i < len(s) {
		d := digitValue(s[i])
		if d >= base {
			break
		}
		if v > (math.MaxUint64-uint64(d))/uint64(base) {
			overflow = true
		}
		v = v*uint64(base) + uint64(d)
		i++
	}
	if i == start {
		return 0, s
	}
	if overflow {
		return math.MaxUint64, s[i:]
	}
	if neg {
		v = -v
	}
	return v, s[i:]
}

// skipSpaceAndSign skips what strtol and strtoul skip before the digits:
// white space, then one sign. It returns where the digits start and
// whether the sign was a minus.
func skipSpaceAndSign(s string) (i int, neg bool) {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	return i, neg
}

// strtol10 is strtol(s, &end, 10) (saturating at the int64 limits).
func strtol10(s string) (int64, string) {
	i, neg := skipSpaceAndSign(s)
	start := i
	var v int64
	sat := false
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		d := int64(s[i] - '0')
		if v > (math.MaxInt64-d)/10 {
			sat = true
		}
		v = v*10 + d
		i++
	}
	if i == start {
		return 0, s
	}
	if sat {
		if neg {
			return math.MinInt64, s[i:]
		}
		return math.MaxInt64, s[i:]
	}
	if neg {
		v = -v
	}
	return v, s[i:]
}

// atoi is C's atoi: (int)strtol(s, NULL, 10).
func atoi(s string) int32 {
	v, _ := strtol10(s)
	return int32(v)
}

// cInt is a C (int) cast of an unsigned long.
func cInt(v uint64) int32 { return int32(uint32(v)) }

var strtodPrefix = lazyregexp.New(`^[ \t\n\v\f\r]*([+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:infinity|inf|nan)))`)

// strtod reads the longest float prefix of s, 0 when there is none.
func strtod(s string) float64 {
	m := strtodPrefix.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		// Out of range: C returns ±HUGE_VAL, as ParseFloat does with an error.
		return v
	}
	return v
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isDigit(s string) bool { return s != "" && s[0] >= '0' && s[0] <= '9' }

func digitValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return 99
}

// escapeControls renders a message the way Apple's err(3) family does:
// control characters other than tab and newline become \a, \b, \v, \f, \r
// or a three-digit octal escape (reference §8.5).
func escapeControls(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\t' || c == '\n' || c >= 0x20:
			b.WriteByte(c)
		case c == '\a':
			b.WriteString(`\a`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\v':
			b.WriteString(`\v`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\r':
			b.WriteString(`\r`)
		default:
			fmt.Fprintf(&b, `\%03o`, c)
		}
	}
	return b.String()
}

// strerror texts for the errnos the emulator produces.
var strerror = map[string]string{
	"EINVAL": "Invalid argument",
	"EPERM":  "Operation not permitted",
	"ENOENT": "No such file or directory",
	"EEXIST": "File exists",
	"EACCES": "Permission denied",
	"EBUSY":  "Resource busy",
	"ENOSPC": "No space left on device",
}
