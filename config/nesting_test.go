// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"

	"github.com/macake/macake/config/tomltext"
)

// TestDeepNestingIsRefusedWhereItHappens: a file nested past tomltext.MaxNesting
// (inline tables, arrays, dotted keys or a header), or with more than
// tomltext.MaxKeys keys, is one problem at the place it goes too far, found before the library spends quadratic time
// on it; the examples all pass the bound.
func TestDeepNestingIsRefusedWhereItHappens(t *testing.T) {
	const n = 5000 // the 4,000 took 31 s
	for _, tc := range []struct {
		name, text string
		line, col  int
	}{
		{"inline tables", "[match]\ninterface = \"en0\"\nx = " + strings.Repeat("{a=", n) + "1" + strings.Repeat("}", n) + "\n", 3, 6 + 3*(tomltext.MaxNesting-2)}, // x is at level 2, in [match]
		{"arrays", "x = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n", 1, 5 + tomltext.MaxNesting},
		{"dotted key", "\n" + strings.Repeat("a.", n) + "a = 1\n", 2, 1},
		{"header", "# deep\n  [" + strings.Repeat("a.", n) + "a]\n", 2, 3},
		{"keys", "[match]\n" + strings.Repeat("k = 1\n", n), 2 + tomltext.MaxKeys - 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Parse("deep.toml", []byte(tc.text), LoadOptions{})
			probs := Problems(err)
			if len(probs) != 1 {
				t.Fatalf("want one problem, got %v", err)
			}
			p := probs[0]
			if p.Line != tc.line || p.Col != tc.col || !strings.Contains(p.Message, "levels deep here; macake reads at most 16") && !strings.Contains(p.Message, "more than 256 keys") {
				t.Errorf("got %s:%d:%d: %s; want line %d col %d", p.File, p.Line, p.Col, p.Message, tc.line, tc.col)
			}
		})
	}
}
