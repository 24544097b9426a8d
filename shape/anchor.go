// SPDX-License-Identifier: Apache-2.0

package shape

import (
	"errors"
	"fmt"
	"strings"
)

// MaxAnchorPart is the longest component of a pf anchor path in bytes:
// pf keeps each in a 64-byte field with its NUL (PF_ANCHOR_NAME_SIZE).
const MaxAnchorPart = 63

// CheckAnchorName is the one rule for the pf anchor macake owns: the
// settings' anchor, checked by `macake validate`, and pf's check before
// it loads anything. It returns nil for a path of components of letters,
// digits, '.', '-' and '_', separated by '/', each at most MaxAnchorPart
// bytes, the whole under 1024; otherwise an error that says what is wrong.
// It refuses a component that is "." or "..", or that starts with '_'
// (pfctl refuses to change those anchors), and a wildcard, which cannot
// be owned.
func CheckAnchorName(anchor string) error {
	if anchor == "" {
		return errors.New("pf anchor name is empty")
	}
	if len(anchor) >= 1024 {
		return fmt.Errorf("pf anchor %q is longer than 1023 bytes", anchor)
	}
	for _, part := range strings.Split(anchor, "/") {
		switch {
		case part == "":
			return fmt.Errorf("pf anchor %q has an empty path component", anchor)
		case part == "." || part == "..":
			return fmt.Errorf("pf anchor %q: a component may not be %q", anchor, part)
		case len(part) > MaxAnchorPart:
			return fmt.Errorf("pf anchor %q: component %q is %d bytes; pf takes at most %d", anchor, part, len(part), MaxAnchorPart)
		case part[0] == '_':
			return fmt.Errorf("pf anchor %q: pfctl cannot modify anchors whose name starts with '_'", anchor)
		case part == "*":
			return fmt.Errorf("pf anchor %q: a wildcard cannot be owned", anchor)
		}
		for _, c := range part {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
				return fmt.Errorf("pf anchor %q: component %q may only hold letters, digits, '.', '-' and '_'", anchor, part)
			}
		}
	}
	return nil
}
