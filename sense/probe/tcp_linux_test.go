// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
)

// TestTCPFilterPassesOnlyTheReservedPort runs the raw socket's filter in
// x/net/bpf's VM on the data the kernel hands it: an IPv4 packet from its
// IP header (with and without options), an IPv6 one from its TCP header.
func TestTCPFilterPassesOnlyTheReservedPort(t *testing.T) {
	segment := func(dport uint16) []byte {
		b := make([]byte, 20)
		binary.BigEndian.PutUint16(b[0:], 443)
		binary.BigEndian.PutUint16(b[2:], dport)
		return b
	}
	ip4 := func(options int, dport uint16) []byte {
		h := make([]byte, 20+options)
		h[0] = 0x40 | byte(5+options/4)
		h[9] = 6
		return append(h, segment(dport)...)
	}
	for _, c := range []struct {
		name string
		v6   bool
		pkt  []byte
		pass bool
	}{
		{"ipv4 to our port", false, ip4(0, 40001), true},
		{"ipv4 with options to our port", false, ip4(8, 40001), true},
		{"ipv4 to another port", false, ip4(0, 40002), false},
		{"ipv6 to our port", true, segment(40001), true},
		{"ipv6 to another port", true, segment(22), false},
	} {
		vm, err := bpf.NewVM(tcpFilter(40001, c.v6))
		if err != nil {
			t.Fatal(err)
		}
		n, err := vm.Run(c.pkt)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (n > 0) != c.pass {
			t.Errorf("%s: filter returned %d, want pass=%v", c.name, n, c.pass)
		}
	}
}
