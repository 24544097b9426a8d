// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

// recordedStats reads the shapers' counters with a backend whose tc
// answers `tc -s -j qdisc show` with the recording in file, and returns
// the backend, its runner and what it read.
func recordedStats(t *testing.T, file string) (*Backend, *replayRunner, []backend.ShaperStats) {
	t.Helper()
	out, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r := &replayRunner{answers: map[string]execrun.Result{"tc -s -j qdisc show": {Stdout: out}}}
	b := &Backend{Runner: r, Tools: Tools{TC: "tc", IP: "ip"}}
	got, err := b.ShaperStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return b, r, got
}

// TestShaperStatsFromRecordedOutput reads the counters of macake's root
// qdiscs from `tc -s -j qdisc show` as TestKernelShaperStats recorded it
// (a 1 Mbit/s upload shaper after a UDP burst into its 8 KiB queue), with
// one command, and leaves every other qdisc (loopback, the leaves, the
// ingress hook) out.
func TestShaperStatsFromRecordedOutput(t *testing.T) {
	b, r, got := recordedStats(t, "testdata/stats/qdisc-show-s-j.json")
	want := []backend.ShaperStats{
		{Name: "qdisc 4d4b: on ifb-macake0", Bytes: 3582, Packets: 7},
		{Name: "qdisc 4d4b: on wan0", Bytes: 10068, Packets: 10, Drops: 390, Overlimits: 6},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stats:\n got %+v\nwant %+v", got, want)
	}
	if cmds := r.commands(); len(cmds) != 1 {
		t.Errorf("ran %q, want one command", cmds)
	}
	wan := shape.Link{Name: "wan", Interface: "wan0", Slot: 0}
	if got[0].Name != b.ShaperName(wan, shape.Download) || got[1].Name != b.ShaperName(wan, shape.Upload) {
		t.Errorf("%q, %q are not the names status looks the shapers up by", got[0].Name, got[1].Name)
	}

	// Without -s there are no counters, and a counter that is not a number
	// fails the read with what and where.
	if qs, err := ParseQdiscs([]byte(`[{"kind":"htb","handle":"4d4b:","dev":"wan0","root":true}]`)); err != nil || qs[0].Stats != nil {
		t.Errorf("qdisc without -s: %+v %v", qs, err)
	}
	if _, err := ParseQdiscs([]byte(`[{"kind":"htb","handle":"4d4b:","dev":"wan0","root":true,"bytes":"many"}]`)); err == nil {
		t.Error("a counter that is a string was accepted")
	}
	r = &replayRunner{answers: map[string]execrun.Result{"tc -s -j qdisc show": {ExitCode: 1, Stderr: []byte("Cannot open netlink socket\n")}}}
	if _, err := (&Backend{Runner: r, Tools: Tools{TC: "tc", IP: "ip"}}).ShaperStats(context.Background()); err == nil {
		t.Error("a failing tc gave no error")
	}
}

// TestCakeTinsFromRecordedOutput reads CAKE's tins from `tc -s -j qdisc
// show` as TestKernelShaperStats recorded it on a real sch_cake (a cakevm
// guest: a burst of 400 datagrams into a 1 Mbit/s upload shaper with a
// 64 KiB memlimit): diffserv3's three tins by tc's names, the threshold
// in bit/s (tc prints bytes/s), the delays from µs, and the counters of
// CAKE's leaf, not of the prio root above it.
func TestCakeTinsFromRecordedOutput(t *testing.T) {
	_, _, got := recordedStats(t, "testdata/stats/cake-qdisc-show-s-j.json")
	if len(got) != 2 || got[1].Name != "qdisc 4d4b: on wan0" {
		t.Fatalf("stats %+v", got)
	}
	up := got[1]
	want := []backend.TinStats{
		{Name: "bulk", ThresholdBits: 62496},
		{Name: "best_effort", ThresholdBits: 1_000_000, Bytes: 495898, Packets: 403, Drops: 371, PeakDelay: 223168 * time.Microsecond,
			AvgDelay: 12705 * time.Microsecond, BaseDelay: 9607 * time.Microsecond, SparseFlows: 1, BulkFlows: 1, UnresponsiveFlows: 1},
	}
	if len(up.Tins) != 3 || !reflect.DeepEqual(up.Tins[:2], want) || up.Tins[2].Name != "voice" {
		t.Errorf("upload tins:\n got %+v\nwant %+v and voice", up.Tins, want)
	}
	if up.Drops != 371 {
		t.Errorf("upload drops %d: not CAKE's own", up.Drops)
	}

	// Tins are named by the diffserv mode; a count that does not fit its
	// names, or a mode without names, numbers them.
	for _, c := range []struct {
		diffserv string
		tins     int
		want     []string
	}{
		{"diffserv4", 4, []string{"bulk", "best_effort", "video", "voice"}},
		{"besteffort", 1, []string{"best_effort"}},
		{"diffserv8", 8, []string{"tin0", "tin1", "tin2", "tin3", "tin4", "tin5", "tin6", "tin7"}},
		{"precedence", 8, []string{"tin0", "tin1", "tin2", "tin3", "tin4", "tin5", "tin6", "tin7"}},
		{"diffserv3", 2, []string{"tin0", "tin1"}},
	} {
		q := &Qdisc{Kind: "cake", Cake: &CakeOptions{Diffserv: c.diffserv}, Stats: &QdiscStats{Tins: make([]CakeTin, c.tins)}}
		var names []string
		for _, tin := range tinStats(q) {
			names = append(names, tin.Name)
		}
		if !slices.Equal(names, c.want) {
			t.Errorf("%s with %d tins: %q, want %q", c.diffserv, c.tins, names, c.want)
		}
	}
	// A tin value that is not a number fails the read, saying where.
	if _, err := ParseQdiscs([]byte(`[{"kind":"cake","handle":"4d4c:","bytes":1,"tins":[{"drops":"x"}]}]`)); err == nil || !strings.Contains(err.Error(), "tin 0") {
		t.Errorf("a tin's counter that is a string: %v", err)
	}
}
