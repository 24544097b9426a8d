// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"os"
	"testing"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

// TestShaperStatsFromRecordedOutput reads the counters of macake's root
// qdiscs from `tc -s -j qdisc show` as TestKernelShaperStats recorded it
// (a 1 Mbit/s upload shaper after a UDP burst into its 8 KiB queue), with
// one command, and leaves every other qdisc (loopback, the leaves, the
// ingress hook) out.
func TestShaperStatsFromRecordedOutput(t *testing.T) {
	out, err := os.ReadFile("testdata/stats/qdisc-show-s-j.json")
	if err != nil {
		t.Fatal(err)
	}
	r := &replayRunner{answers: map[string]execrun.Result{"tc -s -j qdisc show": {Stdout: out}}}
	b := &Backend{Runner: r, Tools: Tools{TC: "tc", IP: "ip"}}
	got, err := b.ShaperStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.ShaperStats{
		{Name: "qdisc 4d4b: on ifb-macake0", Bytes: 3582, Packets: 7},
		{Name: "qdisc 4d4b: on wan0", Bytes: 10068, Packets: 10, Drops: 390, Overlimits: 6},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
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
