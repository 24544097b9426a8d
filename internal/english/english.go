// SPDX-License-Identifier: Apache-2.0

// Package english renders counts and lists in the messages people read:
// "1 change", "3 policies", "40269, 40270 and 2 more".
package english

import (
	"fmt"
	"strings"
)

// Plural renders "1 problem", "2 problems", "4 policies".
func Plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %s", n, PluralNoun(noun))
}

// PluralNoun is the plural of the last word of noun: a consonant and "y"
// become "ies" (policy, not "policys"); every other noun takes "s".
func PluralNoun(noun string) string {
	if n := len(noun); n >= 2 && noun[n-1] == 'y' && !strings.ContainsRune("aeiou", rune(noun[n-2])) {
		return noun[:n-1] + "ies"
	}
	return noun + "s"
}

// Join renders a list, at most max of its items: "a, b" or
// "a, b, c and 7 more".
func Join(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:max], ", "), len(items)-max)
}
