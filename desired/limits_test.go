// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"strings"
	"testing"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/configtest"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/state"
)

// TestMeasuredCapacityAboveTheBackendsLimit: a measured 17.6 Gbit/s link
// is shaped at 95 % of it by tc, and by dummynet at its highest rate,
// with a warning that says so; the cap is never silent (issue 12, item 15).
func TestMeasuredCapacityAboveTheBackendsLimit(t *testing.T) {
	mac := config.HardwareAddr{0x74, 0x24, 0x9f, 0, 0, 1}
	facts := linkfacts.Facts{Interfaces: []linkfacts.InterfaceFacts{{Name: "en0", Up: true, GatewayMAC: mac}}}
	st := &state.State{Profiles: map[string]state.Profile{state.ProfileKey("fiber", mac.String()): {
		DownloadCapacity: 17_600_000_000, UploadCapacity: 900_000_000}}}
	l := configtest.Parse(t, "fiber", configtest.Policy{Interface: "en0", Download: "auto", Upload: "auto",
		More: "queue = \"1MB\"\n[autorate]\ndownload = { max = \"auto\" }\n"}.TOML())
	for _, c := range []struct {
		name     string
		be       BackendFacts
		download int64
		warning  string
	}{
		{"tc", BackendFacts{KernelOverhead: true, Limits: tc.Limits}, 16_720_000_000, ""},
		{"dummynet", BackendFacts{Limits: pfdn.Limits}, 2_147_483_000,
			"the measured download capacity, 17.6 Gbit/s, is above 2147.483 Mbit/s, the highest rate dummynet shapes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Desired([]config.Link{l}, facts, Inputs{State: st}, c.be)
			if err != nil {
				t.Fatal(err)
			}
			a := d.Active[0]
			if a.Download.Pipe.RateBits != c.download || a.Download.Max < c.download || a.Upload.Pipe.RateBits != 855_000_000 {
				t.Errorf("download pipe %d (max %d), upload %d; want %d and 855000000", a.Download.Pipe.RateBits, a.Download.Max, a.Upload.Pipe.RateBits, c.download)
			}
			var warned []string
			for _, w := range d.Warnings {
				warned = append(warned, w.Message)
			}
			got := strings.Join(warned, "\n")
			if c.warning == "" && got != "" || !strings.Contains(got, c.warning) {
				t.Errorf("warnings %q; want %q", got, c.warning)
			}
		})
	}
}
