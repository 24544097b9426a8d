// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/shape"
)

// TestWatchShaperStatsHistoryAndEvents: a status request gets the
// shapers' counters read then (one dnctl list, not one per request within
// two seconds), the links' last minutes one sample a second, and the log's
// last events; the drift tick reads the counters for the metrics.
func TestWatchShaperStatsHistoryAndEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		// A burst into the download pipe (48002): 10 pass, 200 are held,
		// and what the queue cannot take is dropped.
		for i := range 210 {
			pkt := pfdntest.Packet{Interface: "en0", Proto: "tcp", Bytes: 1500, Held: i >= 10,
				Src: netip.MustParseAddrPort("93.184.216.34:443"), Dst: netip.MustParseAddrPort("192.168.1.23:52144")}
			if res := r.emu.Probe(pkt); res.Verdict != pfdntest.Shaped || res.Pipe != 48002 {
				t.Fatalf("probe: %+v", res)
			}
		}
		r.emu.ResetCalls()
		ctx := context.Background()
		st := r.d.Query(ctx, statusapi.Query{History: true, Events: true})
		r.d.Query(ctx, statusapi.Query{})
		lists := 0
		for _, c := range r.emu.Calls() {
			if strings.Join(c.Argv[1:], " ") == "list" {
				lists++
			}
		}
		if lists != 1 {
			t.Errorf("two status requests a moment apart ran dnctl list %d times, want once", lists)
		}
		l := st.Links[0]
		var down *statusapi.Shaper
		for i := range l.Shapers {
			if l.Shapers[i].Direction == "download" {
				down = &l.Shapers[i]
			}
		}
		if down == nil || down.Stats == nil {
			t.Fatalf("no counters on the download shaper: %+v (stats error %q)", l.Shapers, st.Backend.StatsError)
		}
		// The policy's queue at 80 Mbit/s holds what it holds; the rest of
		// the held packets were dropped.
		s := down.Stats
		if s.Packets < 210 || s.Drops == 0 || s.BacklogPackets+s.Drops != 200 || s.BacklogBytes != s.BacklogPackets*1500 {
			t.Errorf("download counters after 10 passing and 200 held packets: %+v", s)
		}
		h := l.History
		if h == nil || len(h.Times) < 4 || len(h.Times) > 6 || len(h.ShaperDown) != len(h.Times) {
			t.Fatalf("history after 5 s, one sample a second: %+v", h)
		}
		if last := len(h.Times) - 1; h.ShaperDown[last] != 80e6 || h.ShaperUp[last] != 20e6 || h.Baseline[last].IsMissing() || h.RTT[last].IsMissing() || h.AchievedDown[last].IsMissing() {
			t.Errorf("last sample: shaper %v/%v, baseline %v, rtt %v", h.ShaperDown[last], h.ShaperUp[last], h.Baseline[last], h.RTT[last])
		}
		since := time.UnixMilli(h.Times[len(h.Times)-2])
		if more := r.d.Query(ctx, statusapi.Query{History: true, Since: since}).Links[0].History; len(more.Times) != 1 {
			t.Errorf("history since the last but one sample: %d samples, want 1", len(more.Times))
		}
		var applied bool
		for _, e := range st.Events {
			applied = applied || e.Event == "apply" && e.Message != ""
		}
		if !applied {
			t.Errorf("the events lack the start's reconcile: %+v", st.Events)
		}
		if st := r.d.Status(); st.Links[0].History != nil || st.Events != nil {
			t.Error("a plain status carries history or events")
		}

		time.Sleep(DefaultDriftInterval)
		synctest.Wait()
		m := r.scrape()
		for _, want := range []string{
			`macake_shaper_drops_total{direction="download",link="home"} ` + strconv.FormatUint(s.Drops, 10),
			`macake_shaper_backlog_packets{direction="download",link="home"} ` + strconv.FormatUint(s.BacklogPackets, 10),
			`macake_shaper_packets_total{direction="upload",link="home"} 0`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s\n%s", want, grepLines(m, "macake_shaper_"))
			}
		}
	})
}

// TestRecordStatusDocument writes a status document with history and
// events from a simulated ten minutes on the rig (idle, a bloated
// download the controller cuts for, recovery, a burst into the download
// pipe), for the fixtures that render one: statusapi's text golden, the
// status page, the menu-bar plugin. Run it with
// MACAKE_RECORD_STATUS=daemon/statusapi/testdata/watch-status.json (a
// path from the repository root); otherwise it skips. Paths, the pid and
// the version are replaced by a Mac's.
func TestRecordStatusDocument(t *testing.T) {
	path := os.Getenv("MACAKE_RECORD_STATUS")
	if path == "" {
		t.Skip("records a fixture; set MACAKE_RECORD_STATUS=FILE to write it")
	}
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		time.Sleep(3 * time.Minute)
		r.net.set(func(n *fakeNet) {
			n.busy, n.bloat = true, 120*time.Millisecond
			n.capacity[shape.Download] = 55_000_000
			n.capacity[shape.Upload] = 18_000_000
		})
		time.Sleep(4 * time.Minute)
		r.net.set(func(n *fakeNet) { n.busy, n.bloat = false, 0 })
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		for i := range 300 {
			r.emu.Probe(pfdntest.Packet{Interface: "en0", Proto: "tcp", Bytes: 1500, Held: i >= 100,
				Src: netip.MustParseAddrPort("93.184.216.34:443"), Dst: netip.MustParseAddrPort("192.168.1.23:52144")})
		}
		time.Sleep(statsMaxAge)
		st := r.d.Query(context.Background(), statusapi.Query{History: true, Events: true})
		st.Daemon.PID, st.Daemon.Version = 412, "v0.9.0"
		st.Daemon.Socket, st.Daemon.ConfigDir, st.Daemon.StateDir = "/var/db/macake/watch.sock", "/etc/macake/links.d", "/var/db/macake"
		for i := range st.Policies {
			st.Policies[i].File = "/etc/macake/links.d/" + st.Policies[i].Name + ".toml"
		}
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", path), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStatusSaysWhereTheLogIs: the status names the file the daemon logs
// to, so that a bug report finds the log of a watch started with
// --log-file (issue 27, item 15).
func TestStatusSaysWhereTheLogIs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, map[string]string{"home": autorateLink}, nil, factsOn("en0", homeMAC))
		synctest.Wait()
		if got := r.d.Query(context.Background(), statusapi.Query{}).Daemon.LogFile; got != rigLogFile {
			t.Errorf("status's log file %q, want %q", got, rigLogFile)
		}
	})
}
