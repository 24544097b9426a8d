// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/internal/golden"
)

// TestTextExplainsNegativeOneWayBaselines: ICMP timestamps measure each
// direction across two clocks, so a reflector whose clock runs ahead
// gives a negative download baseline. Status says so and prints the
// round trip, the delay that is real, instead of a bare "-4.0ms" (issue
// 12 item 19); positive baselines print as before.
func TestTextExplainsNegativeOneWayBaselines(t *testing.T) {
	st := func(down, up float64) Status {
		return Status{Links: []Link{{
			Name: "wan", Interface: "en0", Mode: "autorate",
			Controller: &Controller{
				Mode: "autorate", Status: "running", Responses: 10,
				Download:   Direction{BaselineSeconds: down},
				Upload:     Direction{BaselineSeconds: up},
				Reflectors: []Reflector{{Address: "1.1.1.1", BaselineDownSeconds: down, BaselineUpSeconds: up, Responses: 10}},
			},
		}}}
	}
	for _, tc := range []struct {
		name      string
		down, up  float64
		want, not []string
	}{
		{"clock ahead", -0.004, 0.016,
			[]string{
				"baseline -4.0ms (one-way, shifted by the reflector's clock offset), delay",
				"baseline 16.0ms, delay",
				"baseline ↓-4.0ms ↑16.0ms (one-way, shifted by the reflector's clock offset), round trip 12.0ms, 10 replies",
			}, nil},
		// Timestamps count whole milliseconds: on a sub-millisecond link
		// the sum of the one-way baselines can be negative, never a
		// round trip to print (issue 27, item 8).
		{"below the timestamps' resolution", -0.0009, 0.0001,
			[]string{"round trip under 1ms (ICMP timestamps count whole milliseconds), 10 replies"},
			[]string{"round trip -"}},
		{"synchronised", 0.006, 0.006,
			[]string{"baseline ↓6.0ms ↑6.0ms, 10 replies"},
			[]string{"clock offset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			WriteText(&b, st(tc.down, tc.up), TextOptions{Now: time.Unix(0, 0), GOOS: "linux"})
			got := b.String()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("status lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("status says %q:\n%s", n, got)
				}
			}
		})
	}
}

// TestWriteTextOfARecordedDaemon renders the status TestRecordStatusDocument
// recorded (ten minutes of a link: idle, a bloated download the controller
// cut for, recovery, a burst into the download pipe): the shapers with
// their counters, the history as sparklines, the last events.
func TestWriteTextOfARecordedDaemon(t *testing.T) {
	st := golden.ReadJSON[Status](t, "testdata/watch-status.json")
	h := st.Links[0].History
	now := time.UnixMilli(h.Times[len(h.Times)-1]).UTC()
	var b bytes.Buffer
	WriteText(&b, st, TextOptions{Now: now, GOOS: "darwin"})
	golden.Check(t, "testdata/watch-status.txt", b.Bytes(), "what `macake status` prints for a running daemon")
}

// TestTextShowsDirectionModesAndPauses: a link whose directions have
// modes of their own shows both ("↓off ↑autorate"), "off" for the
// direction it does not shape, and a line saying why; a pause shows with
// the time left and "paused" in the link's row.
func TestTextShowsDirectionModesAndPauses(t *testing.T) {
	until := time.Date(2026, 12, 1, 15, 4, 5, 0, time.UTC)
	st := Status{
		Links: []Link{{Name: "sat", Interface: "en0", Mode: "autorate", DownloadMode: "off", UploadMode: "autorate",
			Shapers: []Shaper{{Direction: "upload", Name: "pipe 48001", RateBits: 12_000_000, QueueBytes: 32768, Source: "controller"}}},
			{Name: "wan", Interface: "en1", Mode: "autorate", DownloadMode: "autorate", UploadMode: "autorate", PausedUntil: until}},
		Pauses: []Pause{{Link: "wan", Until: until, RemainingSeconds: 1690, By: "alice"}},
	}
	var b strings.Builder
	old := time.Local
	time.Local = time.UTC
	defer func() { time.Local = old }()
	WriteText(&b, st, TextOptions{Now: until.Add(-time.Hour), GOOS: "linux"})
	got := b.String()
	for _, want := range []string{
		"Paused: wan until 15:04:05 (28m10s left; by alice); 'macake resume wan' ends it now",
		"sat   en0        ↓off ↑autorate  not shaped  off       12.0 Mbit/s",
		"wan   en1        autorate        paused",
		"sat on en0 (↓off ↑autorate, profile )",
		`-           download not shaped (download_mode = "off")`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
}

// TestEventSummaryIsOneShortLine: a change is what changed and why, not
// the before and after of every rule; a failed one says so with its
// error; and no value fills the line.
func TestEventSummaryIsOneShortLine(t *testing.T) {
	rules := strings.Repeat("no dummynet quick on en0 inet proto icmp from any to 10.9.0.4 ", 12)
	for _, c := range []struct {
		e    Event
		want string
	}{
		{Event{Event: "change", Link: "home", Message: "change applied", Attrs: map[string]string{"kind": "rules", "id": "com.apple/macake", "action": "update",
			"before.rules_on_en0": "[" + rules + "]", "after.rules_on_en0": "[" + rules + "]", "reason": "reflectors differ"}},
			"home: rules com.apple/macake updated (reflectors differ)"},
		{Event{Event: "change", Link: "home", Message: "change failed", Attrs: map[string]string{"kind": "pipe", "id": "48002", "action": "create",
			"error": "dnctl: invalid argument"}},
			"home: pipe 48002 not created: dnctl: invalid argument"},
		{Event{Event: "drift_repaired", Link: "home", Message: "drift repaired", Attrs: map[string]string{"kind": "rules_changed", "detail": rules}},
			"home: drift repaired (detail=" + rules[:79] + "…, kind=rules_changed)"},
	} {
		if got := EventSummary(c.e); got != c.want {
			t.Errorf("EventSummary:\n got %q\nwant %q", got, c.want)
		}
	}
}

// TestTextShowsCakeTins: under a CAKE shaper's counters, a line per tin
// that carried traffic (diffserv3's idle bulk tin takes no room), with
// its drops, marks, queue, CAKE's own delay and its flows; the ACK
// filter's drops and unresponsive flows only where there are some.
func TestTextShowsCakeTins(t *testing.T) {
	st := Status{Links: []Link{{Name: "wan", Interface: "eth0", Mode: "fixed", Shaped: true, Shapers: []Shaper{{
		Direction: "upload", Name: "qdisc 4d4b: on eth0", RateBits: 4_500_000, Source: "policy",
		Stats: &ShaperStats{Bytes: 36663838, Packets: 58094, Drops: 6496, Tins: []TinStats{
			{Name: "bulk", ThresholdBits: 281248},
			{Name: "best_effort", ThresholdBits: 4_500_000, Bytes: 36663754, Packets: 58092, Drops: 6496, ECNMarks: 12,
				AverageDelaySeconds: 0.000398, PeakDelaySeconds: 0.00881, BaseDelaySeconds: 0.000015, SparseFlows: 8, BulkFlows: 1},
			{Name: "voice", ThresholdBits: 1_125_000, Bytes: 84, Packets: 2, ACKDrops: 3, BacklogBytes: 1514,
				AverageDelaySeconds: 0.000004, PeakDelaySeconds: 0.000282, SparseFlows: 1, UnresponsiveFlows: 1},
		}},
	}}}}}
	var b strings.Builder
	WriteText(&b, st, TextOptions{Now: time.Unix(0, 0), GOOS: "linux"})
	got := b.String()
	for _, want := range []string{
		"tin best_effort: 35 MB in 58092 packets, 6496 dropped, 12 marked, 0 B queued; delay 0.4ms average, 8.8ms peak; flows 8 sparse, 1 bulk\n",
		"tin voice: 84 B in 2 packets, 0 dropped, 0 marked, 3 ACKs filtered, 1514 B queued; delay <0.1ms average, 0.3ms peak; flows 1 sparse, 0 bulk, 1 unresponsive\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "tin bulk") {
		t.Errorf("status shows the idle bulk tin:\n%s", got)
	}
}
