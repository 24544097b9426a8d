// SPDX-License-Identifier: Apache-2.0

// Package terminal answers what output to a terminal depends on: whether
// a writer is one, whether to colour it (--color, NO_COLOR, TERM) and
// whether the locale can show UTF-8 marks.
package terminal

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// fdWriter is an output with a file descriptor (an *os.File).
type fdWriter interface {
	io.Writer
	Fd() uintptr
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(fdWriter)
	return ok && isTerminalFD(f.Fd())
}

// ColorMode is the value of a --color flag: auto, always or never.
type ColorMode string

// ColorAuto colours a terminal only (UseColor); a --color flag's default.
const ColorAuto ColorMode = "auto"

// colorModes are the values of --color.
var colorModes = []string{"auto", "always", "never"}

// String implements flag.Value.
func (m *ColorMode) String() string { return string(*m) }

// Set implements flag.Value.
func (m *ColorMode) Set(s string) error {
	if slices.Contains(colorModes, s) {
		*m = ColorMode(s)
		return nil
	}
	return fmt.Errorf("want auto, always or never, not %q", s)
}

// Choices lists the values --color takes, for the completions.
func (m *ColorMode) Choices() []string { return colorModes }

// UseColor decides whether to colour output written to w: always or
// never as asked; with auto only when w is a terminal, NO_COLOR is unset
// and TERM is not "dumb" (style-and-ux §6.6).
func UseColor(m ColorMode, w io.Writer, getenv func(string) string) bool {
	switch m {
	case "always":
		return true
	case "never":
		return false
	}
	return IsTerminal(w) && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

// UTF8Locale reports whether the locale's character set is UTF-8, the
// way setlocale picks it: the first of LC_ALL, LC_CTYPE and LANG that is
// set.
func UTF8Locale(getenv func(string) string) bool {
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := getenv(k); v != "" {
			v = strings.ToLower(v)
			return strings.Contains(v, "utf-8") || strings.Contains(v, "utf8")
		}
	}
	return false
}
