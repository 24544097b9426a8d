// SPDX-License-Identifier: Apache-2.0

package shape

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
)

func TestParseReflector(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Reflector
		err  string // a part of the error; "" for success
	}{
		{in: "1.1.1.1", want: ICMPReflector(netip.MustParseAddr("1.1.1.1"))},
		{in: "2606:4700:4700::1111", want: ICMPReflector(netip.MustParseAddr("2606:4700:4700::1111"))},
		{in: "icmp:9.9.9.9", want: ICMPReflector(netip.MustParseAddr("9.9.9.9"))},
		{in: "icmp:[2001:db8::1]", want: ICMPReflector(netip.MustParseAddr("2001:db8::1"))},
		{in: "tcp:1.1.1.1:443", want: Reflector{ProbeTCP, netip.MustParseAddr("1.1.1.1"), 443}},
		{in: "udp:10.0.0.1:7", want: Reflector{ProbeUDP, netip.MustParseAddr("10.0.0.1"), 7}},
		{in: "tcp:[2606:4700:4700::1111]:443", want: Reflector{ProbeTCP, netip.MustParseAddr("2606:4700:4700::1111"), 443}},
		{in: "tcp:1.1.1.1", err: `needs a port, e.g. "tcp:1.1.1.1:443"`},
		{in: "tcp:2606:4700::1111", err: "after an IPv6 address in brackets"},
		{in: "tcp:2606:4700::1111:99999", err: `"tcp:[2606:4700::1111]:99999"`},
		{in: "tcp:1.1.1.1:https", err: `"https" is not a port`},
		{in: "tcp:1.1.1.1:70000", err: `"70000" is not a port`},
		{in: "tcp:[::1]:x", err: `"x" is not a port`},
		{in: "udp:1.1.1.1:0", err: "port 0"},
		{in: "icmp:1.1.1.1:443", err: "icmp reflectors take no port"},
		{in: "sctp:1.1.1.1:443", err: `unknown probe kind "sctp"`},
		{in: "TCP:1.1.1.1:443", err: `unknown probe kind "TCP"`},
		{in: "one.one.one.one", err: "is not an IP address"},
		{in: "fade:beef:zz::1", err: "is not an IP address"},
		{in: "tcp:host:443", err: "is not ADDRESS:PORT"},
		{in: "", err: "is not an IP address"},
	} {
		got, err := ParseReflector(c.in)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("ParseReflector(%q): %v", c.in, err)
		case c.err == "" && got != c.want:
			t.Errorf("ParseReflector(%q) = %+v, want %+v", c.in, got, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseReflector(%q) = %+v, %v; want an error with %q", c.in, got, err, c.err)
		}
	}
}

func TestReflectorTextRoundTrip(t *testing.T) {
	rs := []Reflector{
		ICMPReflector(netip.MustParseAddr("1.1.1.1")),
		{ProbeTCP, netip.MustParseAddr("2606:4700:4700::1111"), 443},
		{ProbeUDP, netip.MustParseAddr("192.0.2.7"), 7},
	}
	b, err := json.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	if want := `["1.1.1.1","tcp:[2606:4700:4700::1111]:443","udp:192.0.2.7:7"]`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back []Reflector
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 3 || back[1] != rs[1] || back[2] != rs[2] || back[0] != rs[0] {
		t.Errorf("read back %+v, %v", back, err)
	}
}

func TestSortedReflectors(t *testing.T) {
	in := []Reflector{
		{ProbeTCP, netip.MustParseAddr("8.8.8.8"), 443},
		ICMPReflector(netip.MustParseAddr("2606:4700:4700::1111")),
		ICMPReflector(netip.MustParseAddr("::ffff:8.8.8.8")),
		{ProbeTCP, netip.MustParseAddr("8.8.8.8"), 80},
		ICMPReflector(netip.MustParseAddr("8.8.8.8")),
		{},
	}
	var got []string
	for _, r := range SortedReflectors(in) {
		got = append(got, r.String())
	}
	if want := "8.8.8.8 tcp:8.8.8.8:80 tcp:8.8.8.8:443 2606:4700:4700::1111"; strings.Join(got, " ") != want {
		t.Errorf("sorted %v, want %s", got, want)
	}
}

// FuzzParseReflector: whatever the text, ParseReflector either fails with
// a message that quotes the input or returns a reflector whose String
// reads back to the same reflector.
func FuzzParseReflector(f *testing.F) {
	for _, s := range []string{"1.1.1.1", "tcp:1.1.1.1:443", "udp:[::1]:7", "icmp:fe80::1%en0", "tcp:[fe80::1%en0]:443", "tcp:1.1.1.1", "x:y:z", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseReflector(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ParseReflector(%q): empty error", s)
			}
			return
		}
		if !r.Addr.IsValid() || r.Kind.HasPort() != (r.Port != 0) {
			t.Fatalf("ParseReflector(%q) = %+v", s, r)
		}
		back, err := ParseReflector(r.String())
		if err != nil || back != r {
			t.Fatalf("ParseReflector(%q) = %+v, whose String %q reads back as %+v, %v", s, r, r.String(), back, err)
		}
	})
}
