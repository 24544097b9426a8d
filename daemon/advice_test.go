// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

// TestWatchAdvisesOnBounds: a link that carries more than its max sits
// there; once it has been loaded a minute, most of it at max, status
// advises raising max, to the measured capacity when that is known,
// with the edit to make; a link whose capacity is below its min is cut
// there, and status advises lowering min below what it carried. Before a
// minute of load, and after the bounds change, it advises nothing.
func TestWatchAdvisesOnBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		key := "home@" + homeMAC
		st := &state.State{Profiles: map[string]state.Profile{key: {Link: "home", PeakDownload: 250_000_000, DownloadCapacity: 240_000_000}}}
		r := newRig(t, map[string]string{"home": autorateLink}, st, factsOn("en0", homeMAC))
		r.net.set(func(n *fakeNet) { n.busy = true }) // a gigabit link: both directions climb to max and stay
		time.Sleep(45 * time.Second)
		if a := r.d.Status().Links[0].Advice; len(a) != 0 {
			t.Fatalf("advice after 45 s of load: %+v", a)
		}
		time.Sleep(30 * time.Second)
		adv := r.d.Status().Links[0].Advice
		if len(adv) != 2 {
			t.Fatalf("advice after 75 s at max: %+v\n%s", adv, r.log)
		}
		down, up := adv[0], adv[1]
		if down.Direction != "download" || down.Bound != "max" || down.Share < 0.9 || down.CurrentBits != 100_000_000 || down.SuggestedBits != 250_000_000 ||
			down.Edit != `[autorate] download = { min = "10mbit", max = "250mbit" }` || !strings.HasSuffix(down.File, "home.toml") ||
			!strings.HasPrefix(down.Message, "download sat at max ") || !strings.Contains(down.Message, "raise max from 100 Mbit/s to ~250 Mbit/s") {
			t.Errorf("download advice (the measured capacity is above max): %+v", down)
		}
		if up.Direction != "upload" || up.SuggestedBits != 42_000_000 || up.Edit != `[autorate] upload = { min = "2mbit", max = "42mbit" }` {
			t.Errorf("upload advice (nothing measured: 40 %% more): %+v", up)
		}

		// The policy is edited as advised: its new bounds start afresh.
		r.write("home", strings.Replace(autorateLink, `max = "100mbit"`, `max = "250mbit"`, 1))
		r.edited()
		time.Sleep(5 * time.Second)
		for _, a := range r.d.Status().Links[0].Advice {
			if a.Direction == "download" {
				t.Errorf("advice on the edited bound before a minute of load under it: %+v", a)
			}
		}

		// A link that carries 5 Mbit/s with a bloated buffer: cut to its
		// 10 Mbit/s min and held there.
		r.net.set(func(n *fakeNet) {
			n.bloat = 150 * time.Millisecond
			n.capacity[shape.Download] = 5_000_000
		})
		time.Sleep(2 * time.Minute)
		var floor *statusapi.Advice
		for i, a := range r.d.Status().Links[0].Advice {
			if a.Direction == "download" {
				floor = &r.d.Status().Links[0].Advice[i]
			}
		}
		if floor == nil || floor.Bound != "min" || floor.CurrentBits != 10_000_000 || floor.SuggestedBits != 4_500_000 ||
			floor.Edit != `[autorate] download = { min = "4500kbit", max = "250mbit" }` || !strings.Contains(floor.Message, "was cut to min") {
			t.Errorf("advice on a link below its min: %+v", floor)
		}
	})
}
