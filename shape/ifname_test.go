// SPDX-License-Identifier: Apache-2.0

package shape

import (
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestCheckInterfaceName: the names each former rule took that are real
// (macOS, and Linux as OpenWrt and systemd name them) pass; what the
// strictest refused for a reason is refused, saying why.
func TestCheckInterfaceName(t *testing.T) {
	for _, ok := range []string{"en0", "utun3", "bridge100", "pdp_ip0", "awdl0", "lo0",
		"eth0", "pppoe-wan", "br-lan", "eth0.2", "wlp2s0", "enp0s31f6", "wg0", "ifb0", "abcdefghijklmno"} {
		if err := CheckInterfaceName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for bad, why := range map[string]string{
		"":                 "name is empty",
		".":                "must start with a lower-case letter",
		"..":               "must start with a lower-case letter",
		"../eth0":          "contains '/', ':' or white space",
		"eth/0":            "contains '/', ':' or white space",
		"eth0:1":           "contains '/', ':' or white space",
		"en0 all pipe 1":   "may only hold lower-case letters",
		"Wi-Fi":            "must start with a lower-case letter",
		"eN0":              "may only hold lower-case letters",
		"0en":              "must start with a lower-case letter",
		"en0\x00":          "may only hold",
		"abcdefghijklmnop": "is longer than 15 characters",
		"ifb-macake0":      "one of macake's own IFB devices",
		"ifb-macake17":     "one of macake's own IFB devices",
	} {
		if err := CheckInterfaceName(bad); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckInterfaceName(%q) = %v, want an error containing %q", bad, err, why)
		}
	}
}

// TestCheckInterfaceNameIsTheDocumentedRule: docs/CONFIG.md gives the rule
// as a regular expression; the function must agree with it on every name.
func TestCheckInterfaceNameIsTheDocumentedRule(t *testing.T) {
	doc, err := os.ReadFile("../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `interface` \\|[^|]*\\|[^|]*\\| `(\\^[^`]*\\$)`").FindSubmatch(doc)
	if row == nil {
		t.Fatal("docs/CONFIG.md: the interface row gives no ^…$ rule")
	}
	re := regexp.MustCompile(string(row[1]))
	const alphabet = "aez09._-/: A\x00é"
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		b := make([]byte, r.IntN(18))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		n := string(b)
		if got, want := CheckInterfaceName(n) == nil, re.MatchString(n); got != want {
			t.Fatalf("CheckInterfaceName(%q) accepts: %v, the documented rule: %v", n, got, want)
		}
	}
}
