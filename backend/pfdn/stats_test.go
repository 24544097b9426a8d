// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"context"
	"net/netip"
	"reflect"
	"testing"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn/pfdntest"
)

// TestShaperStatsCountWhatThePipesDid sends traffic through the emulated
// kernel (passing, queued and dropped for a full queue) and reads it back
// as `dnctl list` prints it: what a pipe took in, holds and dropped, per
// pipe, with one read-only command.
func TestShaperStatsCountWhatThePipesDid(t *testing.T) {
	ctx := context.Background()
	h := shapedWanLTE(t)
	read := func() map[string]backend.ShaperStats {
		t.Helper()
		h.e.ResetCalls()
		stats, err := h.b.ShaperStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if calls := h.e.Calls(); len(calls) != 1 || calls[0].Argv[1] != "list" {
			t.Fatalf("reading the counters ran %+v, want one dnctl list", calls)
		}
		out := map[string]backend.ShaperStats{}
		for _, s := range stats {
			out[s.Name] = s
		}
		return out
	}
	before := read()
	if len(before) != 4 {
		t.Fatalf("stats of %d pipes, want macake's 4: %+v", len(before), before)
	}
	// Outbound on en0 is wan's upload pipe, 48001, with a 64 KiB queue.
	out := func(n int, held bool) {
		for range n {
			r := h.e.Probe(pfdntest.Packet{Interface: "en0", Out: true, Proto: "tcp", Bytes: 1500, Held: held,
				Src: netip.MustParseAddrPort("192.168.1.23:52144"), Dst: netip.MustParseAddrPort("93.184.216.34:443")})
			if r.Verdict != pfdntest.Shaped || r.Pipe != 48001 {
				t.Fatalf("probe: %+v", r)
			}
		}
	}
	out(10, false)
	out(50, true) // 44 fit (the queue drops once it holds more than 65536 bytes), 6 are dropped
	after := read()
	got, was := after["pipe 48001"], before["pipe 48001"]
	want := backend.ShaperStats{Name: "pipe 48001", Bytes: was.Bytes + 60*1500, Packets: was.Packets + 60,
		Drops: was.Drops + 6, BacklogPackets: 44, BacklogBytes: 44 * 1500}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("upload pipe after 60 packets:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(after["pipe 48002"], before["pipe 48002"]) {
		t.Errorf("the download pipe moved: %+v → %+v", before["pipe 48001"], after["pipe 48001"])
	}
	if !h.e.Drain(48001) {
		t.Fatal("no pipe 48001 to drain")
	}
	drained := read()["pipe 48001"]
	if drained.BacklogBytes != 0 || drained.BacklogPackets != 0 || drained.Drops != want.Drops || drained.Bytes != want.Bytes {
		t.Errorf("after the queue drained: %+v (totals and drops stay, the backlog goes)", drained)
	}
}
