// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"bytes"
	"encoding/json"
	"os"
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

// readStatus reads a recorded status document.
func readStatus(t *testing.T, path string) Status {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestWriteTextOfARecordedDaemon renders the status TestRecordStatusDocument
// recorded (ten minutes of a link: idle, a bloated download the controller
// cut for, recovery, a burst into the download pipe): the shapers with
// their counters, the history as sparklines, the last events.
func TestWriteTextOfARecordedDaemon(t *testing.T) {
	st := readStatus(t, "testdata/watch-status.json")
	h := st.Links[0].History
	now := time.UnixMilli(h.Times[len(h.Times)-1]).UTC()
	var b bytes.Buffer
	WriteText(&b, st, TextOptions{Now: now, GOOS: "darwin"})
	golden.Check(t, "testdata/watch-status.txt", b.Bytes(), "what `macake status` prints for a running daemon")
}
