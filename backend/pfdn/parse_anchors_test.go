// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAnchors(t *testing.T) {
	got, err := ParseAnchors([]byte("  com.apple/200.AirDrop\n  com.apple/250.ApplicationFirewall\n  com.apple/macake\n"), []byte("No ALTQ support in kernel\nALTQ related functions disabled\n"))
	if err != nil || strings.Join(got, ",") != "com.apple/200.AirDrop,com.apple/250.ApplicationFirewall,com.apple/macake" {
		t.Errorf("ParseAnchors = %q, %v", got, err)
	}
	if _, err := ParseAnchors(nil, []byte("Anchor 'nope' not found.\n")); !errors.Is(err, ErrAnchorMissing) {
		t.Errorf("missing anchor: %v", err)
	}
	if _, err := ParseAnchors(nil, []byte("pfctl: /dev/pf: Permission denied\n")); err == nil {
		t.Error("permission denied: no error")
	}
	if _, err := ParseAnchors([]byte("TRANSLATION RULES:\n"), nil); err == nil {
		t.Error("a line that is not an anchor: no error")
	}
}

// FuzzParseAnchors: any input gives paths without spaces or an error,
// never a panic.
func FuzzParseAnchors(f *testing.F) {
	f.Add([]byte("  com.apple\n  com.apple.nlc\n"), []byte(""))
	f.Add([]byte(""), []byte("Anchor 'com.apple/x' not found.\n"))
	f.Add([]byte("  com.apple/250.ApplicationFirewall\r\n"), []byte("No ALTQ support in kernel\n"))
	f.Add([]byte("   \n  a b\n"), []byte("pfctl: /dev/pf: Permission denied"))
	f.Fuzz(func(t *testing.T, stdout, stderr []byte) {
		paths, err := ParseAnchors(stdout, stderr)
		if err != nil {
			return
		}
		for _, p := range paths {
			if p == "" || strings.ContainsAny(p, " \t\"") {
				t.Errorf("bad path %q", p)
			}
		}
	})
}
