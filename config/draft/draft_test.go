// SPDX-License-Identifier: Apache-2.0

package draft

import (
	"strings"
	"testing"

	"github.com/macake/macake/config"
)

func TestNameFor(t *testing.T) {
	for _, tc := range []struct{ ssid, iface, want string }{
		{"My iPhone", "en0", "my-iphone"},
		{"STARLINK", "en0", "starlink"},
		{"Café ☕ Wi-Fi", "en0", "caf-wi-fi"},
		{"", "en0", "en0"},
		{"☕", "enp0s31f6", "enp0s31f6"},
		{"--", "", ""},
		{strings.Repeat("a", 40), "en0", strings.Repeat("a", 32)},
	} {
		if got := NameFor(tc.ssid, tc.iface); got != tc.want {
			t.Errorf("NameFor(%q, %q) = %q, want %q", tc.ssid, tc.iface, got, tc.want)
		}
	}
}

func FuzzNameFor(f *testing.F) {
	f.Add("My iPhone", "en0")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, ssid, iface string) {
		if name := NameFor(ssid, iface); name != "" && !config.ValidLinkName(name) {
			t.Fatalf("NameFor(%q, %q) = %q, not a valid link name", ssid, iface, name)
		}
	})
}
