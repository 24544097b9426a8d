// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/shape"
)

func TestParseClassesTextFromIproute2_6_1(t *testing.T) {
	// `tc -d -j class show` on iproute2 6.1 prints text, statistics with -s.
	out := "class htb 4d4b:1 root leaf 4d4c: prio 0 quantum 1514 rate 12345Kbit overhead 18 ceil 12345Kbit linklayer ethernet burst 1597b/1 mpu 64b cburst 1597b/1 mpu 0b level 0 \n" +
		" Sent 516 bytes 6 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n" +
		"class htb 4d4b:2 parent 4d4b:1 prio 0 rate 1Gbit ceil 2Gbit burst 1375b cburst 1375b \n"
	cs, err := ParseClasses([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 {
		t.Fatalf("got %d classes, want 2", len(cs))
	}
	c := cs[0]
	if c.Handle != ClassHandle || !c.Root || c.Leaf != LeafHandle || c.RateBits != 12_345_000 || c.CeilBits != 12_345_000 ||
		c.Overhead != 18 || c.MPU != 64 || c.Quantum != 1514 || c.Exact {
		t.Errorf("class = %+v", c)
	}
	if cs[1].Parent != ClassHandle || cs[1].Root || cs[1].RateBits != 1e9 || cs[1].CeilBits != 2e9 {
		t.Errorf("second class = %+v", cs[1])
	}
}

func TestParseClassesJSON(t *testing.T) {
	out := `[{"class":"htb","handle":"4d4b:1","root":true,"leaf":"0x4d4c","prio":0,"quantum":1514,"rate":3765432,"overhead":18,"ceil":3765432,"mpu_rate":64}]`
	cs, err := ParseClasses([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	c := cs[0]
	if c.Leaf != LeafHandle || c.RateBits != 3765432*8 || !c.Exact || c.Overhead != 18 || c.MPU != 64 {
		t.Errorf("class = %+v", c)
	}
}

func TestParseFiltersKeepsEveryU32Match(t *testing.T) {
	// tc repeats the "match" key within one object.
	out := `[{"protocol":"ipv6","pref":19786,"kind":"u32","chain":0},
	{"protocol":"ipv6","pref":19786,"kind":"u32","chain":0,"options":{"fh":"801:","ht_divisor":1}},
	{"protocol":"ipv6","pref":19786,"kind":"u32","chain":0,"options":{"fh":"801::800","order":2048,"key_ht":"801","bkt":"0","flowid":"ffff:1","not_in_hw":true,
	"match":{"value":"3a00","mask":"ff00","offmask":"","off":4},"match":{"value":"20010db8","mask":"ffffffff","offmask":"","off":8},
	"match":{"value":"0","mask":"ffffffff","offmask":"","off":12},"match":{"value":"0","mask":"ffffffff","offmask":"","off":16},
	"match":{"value":"1","mask":"ffffffff","offmask":"","off":20}}}]`
	fs, err := ParseFilters([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 3 || !fs[0].Header || !fs[1].Header || fs[2].Header {
		t.Fatalf("filters = %+v, want two headers and one rule", fs)
	}
	if len(fs[2].Keys) != 5 {
		t.Fatalf("kept %d u32 keys, want 5", len(fs[2].Keys))
	}
	r, ok := exemptReflector(ingressHook, "ipv6", fs[2].Keys)
	if !ok || r != shape.ICMPReflector(netip.MustParseAddr("2001:db8::1")) || !isOurExemption(fs[2], ingressHook, false) {
		t.Errorf("exemption read back as %v, %v", r, ok)
	}
}

func TestExemptKeysRoundTrip(t *testing.T) {
	for _, s := range []string{"1.1.1.1", "10.77.0.2", "2606:4700:4700::1111", "fd77::2", "tcp:1.1.1.1:443", "udp:10.77.0.2:7", "tcp:[2606:4700:4700::1111]:443", "udp:[fd77::2]:65535"} {
		r, err := shape.ParseReflector(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []hook{egressHook, ingressHook} {
			_, proto := exemptPref(r.Addr)
			got, ok := exemptReflector(h, proto, exemptKeys(h, r))
			if !ok || got != r {
				t.Errorf("%s %s: read back %v, %v", s, h, got, ok)
			}
		}
	}
	// A destination match is not a source exemption.
	for _, s := range []string{"1.1.1.1", "tcp:1.1.1.1:443"} {
		r, _ := shape.ParseReflector(s)
		if _, ok := exemptReflector(ingressHook, "ip", exemptKeys(egressHook, r)); ok {
			t.Errorf("an egress exemption of %s was read as an ingress one", s)
		}
	}
	// Without its port, a TCP exemption would exempt all TCP to the address.
	r, _ := shape.ParseReflector("tcp:1.1.1.1:443")
	keys := exemptKeys(egressHook, r)
	if _, ok := exemptReflector(egressHook, "ip", keys[:2]); ok {
		t.Error("a TCP match without a port was read as macake's exemption")
	}
}

func TestParseQdiscsCake(t *testing.T) {
	// From a router running cake with manual overhead (tc -j -s output).
	out := `[{"kind":"cake","handle":"8007:","dev":"ens16","root":true,"refcnt":9,"options":{"bandwidth":4750000,"diffserv":"diffserv4","flowmode":"triple-isolate","nat":false,"wash":false,"ingress":false,"ack-filter":"enabled","split_gso":true,"rtt":100000,"raw":false,"atm":"noatm","overhead":18,"mpu":64,"memlimit":33554432,"fwmark":"0"},"bytes":16304449916,"packets":33551067,"drops":7105716,"tins":[{"threshold_rate":296875}]},
	{"kind":"cake","handle":"8008:","dev":"ifb4ens16","root":true,"options":{"bandwidth":"unlimited","diffserv":"diffserv3","flowmode":"dual-dsthost","nat":true,"ingress":true,"ack-filter":"disabled","raw":true,"overhead":0}}]`
	qs, err := ParseQdiscs([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	c := qs[0].Cake
	if qs[0].Dev != "ens16" || c == nil || c.BandwidthBytes != 4750000 || c.Diffserv != "diffserv4" || c.FlowMode != "triple-isolate" ||
		c.ACKFilter != "enabled" || c.Raw || c.Overhead != 18 || c.MPU != 64 || c.Ingress || c.NAT {
		t.Errorf("cake = %+v", c)
	}
	c = qs[1].Cake
	if c.BandwidthBytes != 0 || !c.NAT || !c.Ingress || !c.Raw || c.FlowMode != "dual-dsthost" {
		t.Errorf("unlimited cake = %+v", c)
	}
}

func TestParsersRejectGarbageClearly(t *testing.T) {
	for name, parse := range map[string]func([]byte) error{
		"qdiscs":  func(b []byte) error { _, err := ParseQdiscs(b); return err },
		"filters": func(b []byte) error { _, err := ParseFilters(b); return err },
		"links":   func(b []byte) error { _, err := ParseLinks(b); return err },
	} {
		for _, in := range []string{`Error: Cannot find device "eth9".`, `[{"kind":`, `{"kind":"htb"}`, `[1,2]`, `[{"kind":"htb","handle":"zz:"}]`} {
			err := parse([]byte(in))
			if err == nil {
				if name == "filters" && strings.HasPrefix(in, `[{"kind":"htb"`) {
					continue // a filter line without options is a header
				}
				t.Errorf("%s(%q) accepted garbage", name, in)
				continue
			}
			if !strings.Contains(err.Error(), "output") {
				t.Errorf("%s(%q) error does not say which output: %v", name, in, err)
			}
		}
	}
	if _, err := ParseClasses([]byte("class htb 4d4b:1 root rate")); err == nil {
		t.Error("a class line with a missing rate value was accepted")
	}
	if _, err := ParseClasses([]byte("class htb 4d4b:1 root rate 12Xbit")); err == nil {
		t.Error("a class rate with an unknown unit was accepted")
	}
}

func TestParseRecordedOutputs(t *testing.T) {
	for _, f := range golden.Glob(t, "testdata/diff/*/live.txtar") {
		rec := readRecording(t, f)
		for cmd, out := range rec.outputs {
			var err error
			switch {
			case strings.Contains(cmd, "link show"):
				_, err = ParseLinks([]byte(out))
			case strings.Contains(cmd, "qdisc show"):
				_, err = ParseQdiscs([]byte(out))
			case strings.Contains(cmd, "class show"):
				_, err = ParseClasses([]byte(out))
			case strings.Contains(cmd, "filter show"):
				_, err = ParseFilters([]byte(out))
			}
			if err != nil {
				t.Errorf("%s: %s: %v", f, cmd, err)
			}
		}
	}
}
