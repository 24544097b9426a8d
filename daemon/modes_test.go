// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// starlinkLink is the Starlink recipe of docs/CONFIG.md: a fixed download
// cap and an adaptive upload.
const starlinkLink = `
[match]
interface = "en0"
gateway_mac = "` + homeMAC + `"
[shaper]
download_mode = "fixed"
download = "150mbit"
upload_mode = "autorate"
upload = "12mbit"
[autorate]
upload = { min = "4mbit", max = "30mbit" }
reflectors = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"]
`

// TestWatchFollowsDirectionModes: with a fixed download and an adaptive
// upload, the controller cuts the upload under bufferbloat and never
// touches the download's pipe; status shows each direction's mode. With
// download_mode = "off" the link has no download pipe and no rule for it.
func TestWatchFollowsDirectionModes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, map[string]string{"starlink": starlinkLink}, nil, factsOn("en0", homeMAC))
		if up, down := r.pipeRate(48001), r.pipeRate(48002); up != 12_000_000 || down != 150_000_000 {
			t.Fatalf("pipes at start: upload %d, download %d", up, down)
		}
		// A bloated bottleneck below the download cap: every reply is late.
		r.learnThenBloat(150*time.Millisecond, 100_000_000)
		if up, down := r.pipeRate(48001), r.pipeRate(48002); up >= 12_000_000 || down != 150_000_000 {
			t.Errorf("after 20 s of bufferbloat: upload %d (want cut below 12 Mbit/s), download %d (want the fixed 150 Mbit/s)", up, down)
		}
		for _, c := range r.mutating() {
			if strings.Contains(c, "pipe 48002") {
				t.Errorf("the fixed download's pipe was changed: %s", c)
			}
		}
		st := r.d.Status()
		l := st.Links[0]
		if l.DownloadMode != "fixed" || l.UploadMode != "autorate" || l.ModeText() != "↓fixed ↑autorate" || l.Controller == nil || !l.Controller.Shaping {
			t.Errorf("status: modes %q/%q (%q), controller %+v", l.DownloadMode, l.UploadMode, l.ModeText(), l.Controller)
		}
		if c := l.Controller; c.Download.MinBits != 150_000_000 || c.Download.MaxBits != 150_000_000 || c.Upload.MinBits != 4_000_000 {
			t.Errorf("the controller's ranges: download %d–%d, upload %d–%d", c.Download.MinBits, c.Download.MaxBits, c.Upload.MinBits, c.Upload.MaxBits)
		}

		// Upload only: the download pipe and its rule go.
		r.write("starlink", strings.Replace(starlinkLink, `download_mode = "fixed"`, `download_mode = "off"`, 1))
		r.edited()
		if got := r.pipes(); !slices.Equal(got, []int{48001}) {
			t.Fatalf("pipes with download_mode off: %v\n%s", got, r.log)
		}
		for _, rule := range r.anchorRules() {
			if strings.Contains(rule, "dummynet in") {
				t.Errorf("a rule still shapes the download: %s", rule)
			}
		}
		if !strings.Contains(r.log.String(), "the link no longer shapes its download") {
			t.Errorf("the log does not say why the download pipe went:\n%s", r.log)
		}
		l = r.d.Status().Links[0]
		if len(l.Shapers) != 1 || l.Shapers[0].Direction != "upload" || l.DownloadMode != "off" {
			t.Errorf("status with download off: %+v", l)
		}
	})
}
