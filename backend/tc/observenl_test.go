// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
)

// tcMessage builds a qdisc, class or filter message as the kernel dumps
// it: struct tcmsg, then TCA_KIND and TCA_OPTIONS (opts nil: none).
func tcMessage(t *testing.T, handle, parent, info uint32, kind string, opts func(*netlink.AttributeEncoder)) []byte {
	t.Helper()
	b := make([]byte, sizeofTcmsg)
	ne := binary.NativeEndian
	ne.PutUint32(b[4:], 3)
	ne.PutUint32(b[8:], handle)
	ne.PutUint32(b[12:], parent)
	ne.PutUint32(b[16:], info)
	ae := netlink.NewAttributeEncoder()
	ae.String(tcaKind, kind)
	if opts != nil {
		ae.Nested(tcaOptions, func(nae *netlink.AttributeEncoder) error { opts(nae); return nil })
	}
	attrs, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return append(b, attrs...)
}

// CAKE's options decode as tc prints them. The messages here are built
// as sch_cake's cake_dump writes them (every attribute, in its order), and
// must decode to what tc's JSON of the same qdiscs says (recorded in a
// cakevm guest, the last from testdata/diff/cake-converged); the kernel
// test TestKernelNetlinkObserveMatchesTC compares the two readings on a
// real sch_cake.
func TestDecodeCakeAsTCPrintsIt(t *testing.T) {
	const recorded = `[{"kind":"cake","handle":"4d4b:","dev":"wan0","root":true,"refcnt":2,"options":{"bandwidth":1000000,"diffserv":"besteffort","flowmode":"triple-isolate","nat":true,"wash":false,"ingress":false,"ack-filter":"enabled","split_gso":true,"rtt":100000,"raw":false,"atm":"noatm","overhead":18,"mpu":64,"fwmark":"0"}},` +
		`{"kind":"cake","handle":"4d4b:","dev":"wan0","root":true,"refcnt":2,"options":{"bandwidth":1000000,"diffserv":"diffserv3","flowmode":"triple-isolate","nat":false,"wash":false,"ingress":true,"ack-filter":"disabled","split_gso":true,"rtt":100000,"raw":true,"overhead":0,"fwmark":"0"}},` +
		`{"kind":"cake","handle":"4d4b:","dev":"wan0","root":true,"refcnt":2,"options":{"bandwidth":3765432,"diffserv":"diffserv4","flowmode":"dual-dsthost","nat":true,"wash":false,"ingress":true,"ack-filter":"aggressive","split_gso":true,"rtt":100000,"raw":false,"atm":"noatm","overhead":18,"mpu":64,"fwmark":"0"}},` +
		`{"kind":"cake","handle":"4d4c:","dev":"wan0","parent":"4d4b:2","options":{"bandwidth":2500000,"diffserv":"diffserv4","flowmode":"dual-srchost","nat":true,"wash":true,"ingress":false,"ack-filter":"enabled","split_gso":false,"rtt":50000,"raw":false,"atm":"ptm","overhead":18,"mpu":64,"memlimit":1048576,"fwmark":"0"}}]`
	want, err := ParseQdiscs([]byte(recorded))
	if err != nil {
		t.Fatal(err)
	}
	type kernel struct {
		handle, parent                                       uint32
		rate                                                 uint64
		flowMode, ingress, ack, nat, diffserv, overhead, mpu uint32
		wash, splitGSO, rtt, memory, atm                     uint32
		raw                                                  bool
	}
	for i, k := range []kernel{
		{rate: 1000000, flowMode: 7, ack: 1, nat: 1, diffserv: 3, overhead: 18, mpu: 64, splitGSO: 1, rtt: 100000},
		{rate: 1000000, flowMode: 7, ingress: 1, raw: true, splitGSO: 1, rtt: 100000},
		{rate: 3765432, flowMode: 6, ingress: 1, ack: 2, nat: 1, diffserv: 1, overhead: 18, mpu: 64, splitGSO: 1, rtt: 100000},
		{handle: LeafHandle, parent: CakeClass, rate: 2500000, flowMode: 5, ack: 1, nat: 1, diffserv: 1, overhead: 18, mpu: 64,
			wash: 1, rtt: 50000, memory: 1 << 20, atm: 2},
	} {
		handle, parent := RootHandle, uint32(tcHRoot)
		if k.handle != 0 {
			handle, parent = k.handle, k.parent
		}
		msg := tcMessage(t, handle, parent, 0, "cake", func(ae *netlink.AttributeEncoder) {
			ae.Uint64(tcaCakeBaseRate64, k.rate)
			ae.Uint32(tcaCakeFlowMode, k.flowMode)
			ae.Uint32(tcaCakeRTT, k.rtt)
			ae.Uint32(8, max(k.rtt/20, 1)) // TARGET
			ae.Uint32(tcaCakeMemory, k.memory)
			ae.Uint32(9, 0) // AUTORATE
			ae.Uint32(tcaCakeIngress, k.ingress)
			ae.Uint32(tcaCakeAckFilter, k.ack)
			ae.Uint32(tcaCakeNAT, k.nat)
			ae.Uint32(tcaCakeDiffservMode, k.diffserv)
			ae.Uint32(tcaCakeWash, k.wash)
			ae.Uint32(tcaCakeOverhead, k.overhead)
			if k.raw {
				ae.Uint32(tcaCakeRaw, 0)
			}
			ae.Uint32(tcaCakeATM, k.atm)
			ae.Uint32(tcaCakeMPU, k.mpu)
			ae.Uint32(tcaCakeSplitGSO, k.splitGSO)
			ae.Uint32(18, 0) // FWMARK
		})
		got, err := decodeQdisc(msg, "wan0", false)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("qdisc %d: decoded %+v cake %+v\nwant tc's %+v cake %+v", i, got, *got.Cake, want[i], *want[i].Cake)
		}
	}
}

// A kind or an attribute macake has no use for is skipped, never an
// error: a foreign qdisc must not make the whole reading fail.
func TestDecodeSkipsUnknownKindsAndAttributes(t *testing.T) {
	msg := tcMessage(t, 0x10000, tcHRoot, 0, "some_future_qdisc", func(ae *netlink.AttributeEncoder) {
		ae.Uint32(1, 7)
		ae.Bytes(99, []byte{1, 2, 3})
	})
	q, err := decodeQdisc(msg, "eth0", false)
	if err != nil || q.Kind != "some_future_qdisc" || !q.Root || q.Handle != 0x10000 {
		t.Errorf("decodeQdisc = %+v, %v", q, err)
	}
	f, err := decodeFilter(tcMessage(t, 0x800800, 0, 5<<16|0x0300, "flower", func(ae *netlink.AttributeEncoder) {
		ae.Uint32(1, 1)
	}), func(int) string { return "" })
	if err != nil || f.Kind != "flower" || f.Pref != 5 || f.Header {
		t.Errorf("decodeFilter = %+v, %v", f, err)
	}
}

func TestFormatU32HandleAsTC(t *testing.T) {
	for h, want := range map[uint32]string{0: "none", 0x80000000: "800:", 0x80000800: "800::800", 0x80101001: "801:1:1"} {
		if got := formatU32Handle(h); got != want {
			t.Errorf("formatU32Handle(%#x) = %q, want %q", h, got, want)
		}
	}
}

// A link message decodes to what `ip -d -j link show` says: name, index,
// UP, and the kind of its link info.
func TestDecodeLink(t *testing.T) {
	hdr := make([]byte, sizeofIfinfomsg)
	binary.NativeEndian.PutUint32(hdr[4:], 7)
	binary.NativeEndian.PutUint32(hdr[8:], iffUp|0x1000)
	ae := netlink.NewAttributeEncoder()
	ae.String(iflaIfname, "ifb-macake3")
	ae.Nested(iflaLinkinfo, func(nae *netlink.AttributeEncoder) error {
		nae.String(iflaInfoKind, "ifb")
		return nil
	})
	attrs, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	d, err := decodeLink(append(hdr, attrs...))
	if want := (Device{Name: "ifb-macake3", Index: 7, Kind: "ifb", Up: true}); err != nil || d != want {
		t.Errorf("decodeLink = %+v, %v; want %+v", d, err, want)
	}
}

// An htb class decodes with its exact rates (above 2^32−1 bytes/s from
// the 64-bit attributes), overhead, mpu, quantum and leaf.
func TestDecodeClass(t *testing.T) {
	opt := make([]byte, 40) // struct tc_htb_opt
	ne := binary.NativeEndian
	ne.PutUint16(opt[2:], 18)         // rate.overhead
	ne.PutUint16(opt[6:], 64)         // rate.mpu
	ne.PutUint32(opt[8:], 0xffffffff) // rate.rate: see RATE64
	ne.PutUint32(opt[20:], 3_765_432) // ceil.rate
	ne.PutUint32(opt[32:], 1514)      // quantum
	msg := tcMessage(t, ClassHandle, RootHandle, LeafHandle, "htb", func(ae *netlink.AttributeEncoder) {
		ae.Bytes(tcaHTBParms, opt)
		ae.Uint64(tcaHTBRate64, 5_000_000_000)
	})
	c, err := decodeClass(msg)
	want := Class{Kind: "htb", Handle: ClassHandle, Parent: RootHandle, Leaf: LeafHandle, RateBits: 40_000_000_000,
		CeilBits: 30_123_456, Exact: true, Overhead: 18, MPU: 64, Quantum: 1514}
	if err != nil || c != want {
		t.Errorf("decodeClass = %+v, %v\nwant %+v", c, err, want)
	}
}

// prio's options (a struct tc_prio_qopt, not nested) decode as tc prints
// them, as recorded in a cakevm guest.
func TestDecodePrioAsTCPrintsIt(t *testing.T) {
	want, err := ParseQdiscs([]byte(`[{"kind":"prio","handle":"4d4b:","dev":"wan0","root":true,"refcnt":3,"options":{"bands":2,"priomap":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"multiqueue":false}}]`))
	if err != nil {
		t.Fatal(err)
	}
	opt := make([]byte, sizeofPrioQopt)
	binary.NativeEndian.PutUint32(opt, 2)
	for i := range 16 {
		opt[4+i] = 1
	}
	msg := append(make([]byte, sizeofTcmsg), 0, 0, 0, 0)
	binary.NativeEndian.PutUint32(msg[8:], RootHandle)
	binary.NativeEndian.PutUint32(msg[12:], tcHRoot)
	ae := netlink.NewAttributeEncoder()
	ae.String(tcaKind, "prio")
	ae.Bytes(tcaOptions, opt)
	attrs, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeQdisc(append(msg[:sizeofTcmsg], attrs...), "wan0", false)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want[0]) || !isOurPrio(got.Prio) {
		t.Errorf("decoded %+v prio %+v, want tc's %+v prio %+v", got, got.Prio, want[0], want[0].Prio)
	}
}

// CAKE's statistics decode as tc -s -j prints them: the app statistics
// (TCA_STATS_APP in TCA_STATS2) nest the tins, one attribute each, in
// tc's order, as sch_cake's cake_dump_stats writes them; attributes macake
// does not read are skipped, and app statistics that are not attributes
// fail the reading with the qdisc named. (The kernel test
// TestKernelShaperStats compares both readings on a real sch_cake.)
func TestDecodeCakeTinStats(t *testing.T) {
	tin := func(ae *netlink.AttributeEncoder, rate, bytes uint64, pkts, drops, peak uint32) {
		ae.Uint64(12, rate) // THRESHOLD_RATE64
		ae.Uint64(3, bytes) // SENT_BYTES64
		ae.Uint32(11, 1514) // BACKLOG_BYTES
		ae.Uint32(13, 5000) // TARGET_US (not read)
		ae.Uint32(2, pkts)  // SENT_PACKETS
		ae.Uint32(4, drops) // DROPPED_PACKETS
		ae.Uint32(8, 3)     // ECN_MARKED_PACKETS
		ae.Uint32(6, 2)     // ACKS_DROPPED_PACKETS
		ae.Uint32(18, peak) // PEAK_DELAY_US
		ae.Uint32(19, 398)  // AVG_DELAY_US
		ae.Uint32(20, 15)   // BASE_DELAY_US
		ae.Uint32(21, 8)    // SPARSE_FLOWS
		ae.Uint32(22, 1)    // BULK_FLOWS
		ae.Uint32(23, 0)    // UNRESPONSIVE_FLOWS
		ae.Uint32(24, 1514) // MAX_SKBLEN (not read)
	}
	app := func(tins bool) []byte {
		ae := netlink.NewAttributeEncoder()
		ae.Uint64(2, 562500) // CAPACITY_ESTIMATE64
		ae.Uint32(4, 308264) // MEMORY_USED
		if tins {
			ae.Nested(tcaCakeStatsTinStats, func(nae *netlink.AttributeEncoder) error {
				nae.Nested(1, func(t *netlink.AttributeEncoder) error { tin(t, 35156, 0, 0, 0, 0); return nil })
				nae.Nested(2, func(t *netlink.AttributeEncoder) error { tin(t, 562500, 36663754, 58092, 6496, 8810); return nil })
				return nil
			})
		}
		b, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	msg := func(app []byte) []byte {
		b := make([]byte, sizeofTcmsg)
		binary.NativeEndian.PutUint32(b[8:], LeafHandle)
		binary.NativeEndian.PutUint32(b[12:], CakeClass)
		ae := netlink.NewAttributeEncoder()
		ae.String(tcaKind, "cake")
		ae.Nested(tcaStats2, func(nae *netlink.AttributeEncoder) error {
			basic := make([]byte, 16)
			binary.NativeEndian.PutUint64(basic, 36663754)
			binary.NativeEndian.PutUint32(basic[8:], 58092)
			nae.Bytes(tcaStatsBasic, basic)
			nae.Bytes(tcaStatsApp, app)
			return nil
		})
		attrs, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return append(b, attrs...)
	}
	q, err := decodeQdisc(msg(app(true)), "wan0", true)
	if err != nil {
		t.Fatal(err)
	}
	want := []CakeTin{
		{ThresholdRate: 35156, BacklogBytes: 1514, ECNMarks: 3, ACKDrops: 2, AvgDelayUs: 398, BaseDelayUs: 15, SparseFlows: 8, BulkFlows: 1},
		{ThresholdRate: 562500, SentBytes: 36663754, SentPackets: 58092, Drops: 6496, ECNMarks: 3, ACKDrops: 2, BacklogBytes: 1514,
			PeakDelayUs: 8810, AvgDelayUs: 398, BaseDelayUs: 15, SparseFlows: 8, BulkFlows: 1},
	}
	if q.Stats == nil || q.Stats.Packets != 58092 || !reflect.DeepEqual(q.Stats.Tins, want) {
		t.Errorf("decoded stats %+v, want tins %+v", q.Stats, want)
	}
	if q, err := decodeQdisc(msg(app(false)), "wan0", true); err != nil || q.Stats.Tins != nil {
		t.Errorf("CAKE statistics without tins: %+v, %v", q.Stats, err)
	}
	if q, err := decodeQdisc(msg(app(true)), "wan0", false); err != nil || q.Stats != nil {
		t.Errorf("without stats asked for: %+v, %v", q.Stats, err)
	}
	if _, err := decodeQdisc(msg([]byte{9, 0, 1}), "wan0", true); err == nil || !strings.Contains(err.Error(), "cake qdisc 4d4c: on wan0") {
		t.Errorf("app statistics that are not attributes: %v", err)
	}
}
