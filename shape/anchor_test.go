// SPDX-License-Identifier: Apache-2.0

package shape

import (
	"strings"
	"testing"
)

func TestCheckAnchorName(t *testing.T) {
	for anchor, want := range map[string]string{
		"com.apple/macake":                     "",
		"macake":                               "",
		"com.apple/" + strings.Repeat("a", 63): "",
		"com.apple/" + strings.Repeat("a", 64): "64 bytes; pf takes at most 63",
		"":                                     "empty",
		"com.apple//macake":                    "empty path component",
		"com.apple/../x":                       `may not be ".."`,
		"com.apple/_x":                         "starts with '_'",
		"com.apple/*":                          "wildcard",
		"com.apple/ma cake":                    "may only hold",
		strings.Repeat(strings.Repeat("a", 60)+"/", 17): "longer than 1023 bytes",
	} {
		err := CheckAnchorName(anchor)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", anchor, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want %q", anchor, err, want)
		}
	}
}
