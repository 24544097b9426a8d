// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"slices"
)

// fdWriter is an output with a file descriptor (an *os.File).
type fdWriter interface {
	io.Writer
	Fd() uintptr
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(fdWriter)
	return ok && isTerminalFD(f.Fd())
}

// colorMode is the value of --color.
type colorMode string

func (m *colorMode) String() string { return string(*m) }

// colorModes are the values of --color.
var colorModes = []string{"auto", "always", "never"}

func (m *colorMode) Set(s string) error {
	if slices.Contains(colorModes, s) {
		*m = colorMode(s)
		return nil
	}
	return fmt.Errorf("want auto, always or never, not %q", s)
}

// Choices lists the values --color takes, for the completions.
func (m *colorMode) Choices() []string { return colorModes }

// useColor decides whether to colour output written to w: always or never
// as asked; with auto only when w is a terminal, NO_COLOR is unset and TERM
// is not "dumb" (style-and-ux §6.6).
func (e *env) useColor(m colorMode, w io.Writer) bool {
	switch m {
	case "always":
		return true
	case "never":
		return false
	}
	return isTerminal(w) && e.getenv("NO_COLOR") == "" && e.getenv("TERM") != "dumb"
}
