// SPDX-License-Identifier: Apache-2.0

// Package configtest builds policy files for tests: the TOML of one link's
// policy from the keys tests set most (Policy), written into a links.d
// directory (Write) or parsed into a config.Link (Parse), so that a test
// says what its policy is about rather than how TOML spells it. Tests of
// the parser itself keep their TOML literal: there the spelling is the
// point.
package configtest

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/config"
)

// Policy is one link's policy file. Empty fields are left out, so the
// parser's defaults apply.
type Policy struct {
	// Interface, GatewayMAC and Priority are [match]'s keys.
	Interface  string
	GatewayMAC string
	Priority   int
	// Mode, Download and Upload are [shaper]'s keys ("fixed", "50mbit",
	// "auto", …).
	Mode             string
	Download, Upload string
	// More is appended as it is: keys of the last table written (of
	// [shaper] when a shaper key is set), then tables of their own
	// ("[autorate]\n…").
	More string
}

// TOML is the policy file's text.
func (p Policy) TOML() string {
	var b strings.Builder
	b.WriteString("[match]\n")
	str := func(key, value string) {
		if value != "" {
			fmt.Fprintf(&b, "%s = %q\n", key, value)
		}
	}
	str("interface", p.Interface)
	str("gateway_mac", p.GatewayMAC)
	if p.Priority != 0 {
		fmt.Fprintf(&b, "priority = %d\n", p.Priority)
	}
	if p.Mode != "" || p.Download != "" || p.Upload != "" {
		b.WriteString("[shaper]\n")
		str("mode", p.Mode)
		str("download", p.Download)
		str("upload", p.Upload)
	}
	b.WriteString(p.More)
	return b.String()
}

// Write writes text as dir/NAME.toml, creating dir, and returns the
// file's path; it fails the test on error.
func Write(tb testing.TB, dir, name, text string) string {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, name+".toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Parse parses text as the policy file links.d/NAME.toml and fails the
// test when it does not parse.
func Parse(tb testing.TB, name, text string) config.Link {
	tb.Helper()
	l, _, err := config.Parse("links.d/"+name+".toml", []byte(text), config.LoadOptions{})
	if err != nil {
		tb.Fatalf("policy %s: %v", name, err)
	}
	return l
}

// Addrs parses ss into addresses (a policy's reflectors, a probe's
// targets), failing loudly on a typo in the test that wrote them.
func Addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}
