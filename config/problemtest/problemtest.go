// SPDX-License-Identifier: Apache-2.0

// Package problemtest checks the placed problems and warnings a file
// parser reports ("LINE:COL: message"), for the tests of config and of
// config/settings. It imports nothing of config, so that config's own
// tests may use it.
package problemtest

import (
	"fmt"
	"strings"
	"testing"
)

// Pos renders a problem or warning as "LINE:COL: message".
func Pos(line, col int, msg string) string { return fmt.Sprintf("%d:%d: %s", line, col, msg) }

// Expect checks got against want, where each want is "LINE:COL: part of
// the message" and the order is the report order.
func Expect(t testing.TB, what string, got []string, want []string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		loc, part, _ := strings.Cut(want[i], " ")
		ok = strings.HasPrefix(got[i], loc+" ") && strings.Contains(got[i], part)
	}
	if !ok {
		t.Errorf("%s:\n got:  %s\n want: %s", what, strings.Join(got, "\n       "), strings.Join(want, "\n       "))
	}
}
