// SPDX-License-Identifier: Apache-2.0

package configtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/units"
)

// TestWriteThenLoad: what Write writes is what config.Load reads, every
// field in its place.
func TestWriteThenLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "links.d")
	p := Policy{Interface: "en0", GatewayMAC: "74:24:9f:00:00:01", Priority: 5, Mode: "fixed", Download: "50mbit", Upload: "5mbit"}
	path := Write(t, dir, "cable", p.TOML())
	if path != filepath.Join(dir, "cable.toml") {
		t.Errorf("wrote %s", path)
	}
	links, _, err := config.Load(dir, config.LoadOptions{SkipOwnershipCheck: true})
	if err != nil || len(links) != 1 {
		t.Fatalf("%d links, %v", len(links), err)
	}
	l := links[0]
	if l.Name != "cable" || l.Match.Interface != "en0" || l.Match.GatewayMAC.String() != p.GatewayMAC || l.Match.Priority != 5 ||
		l.Shaper.Mode != config.ModeFixed || l.Shaper.Download.Rate != 50*units.Mbit || l.Shaper.Upload.Rate != 5*units.Mbit {
		t.Errorf("loaded %+v", l)
	}
	if parsed := Parse(t, "cable", p.TOML()); parsed.Shaper != l.Shaper || parsed.Match.Interface != l.Match.Interface {
		t.Errorf("Parse gave %+v, Load %+v", parsed, l)
	}
	if b, _ := os.ReadFile(path); string(b) != p.TOML() {
		t.Errorf("file holds %q", b)
	}
}

func TestPolicyTOML(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{Interface: "en0"}, "[match]\ninterface = \"en0\"\n"},
		{Policy{Interface: "en0", GatewayMAC: "74:24:9f:00:00:01", Priority: -10, Mode: "fixed", Download: "50mbit", Upload: "5mbit", More: "queue = \"64KB\"\n"},
			"[match]\ninterface = \"en0\"\ngateway_mac = \"74:24:9f:00:00:01\"\npriority = -10\n[shaper]\nmode = \"fixed\"\ndownload = \"50mbit\"\nupload = \"5mbit\"\nqueue = \"64KB\"\n"},
		{Policy{Interface: "en5", Download: "auto"}, "[match]\ninterface = \"en5\"\n[shaper]\ndownload = \"auto\"\n"},
	} {
		if got := tc.p.TOML(); got != tc.want {
			t.Errorf("%+v:\n%s\nwant\n%s", tc.p, got, tc.want)
		}
	}
}
