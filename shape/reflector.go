// SPDX-License-Identifier: Apache-2.0

package shape

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// ProbeKind is how a reflector is probed. The zero value is ICMP, what a
// plain address in a policy means.
type ProbeKind uint8

// The probe kinds.
const (
	// ProbeICMP is ICMP echo (and timestamps where the reflector answers
	// them).
	ProbeICMP ProbeKind = iota
	// ProbeTCP times a TCP handshake to the reflector's port: SYN to
	// SYN-ACK, or to RST from a closed port. Networks that police or
	// prioritise ICMP treat it like the user's traffic.
	ProbeTCP
	// ProbeUDP sends a datagram to the reflector's port and times the echo
	// (an RFC 862 echo service, or `macake measure --serve`).
	ProbeUDP
)

// ProbeKinds lists the kinds in the order reports show them.
var ProbeKinds = [...]ProbeKind{ProbeICMP, ProbeTCP, ProbeUDP}

// String returns "icmp", "tcp" or "udp".
func (k ProbeKind) String() string {
	switch k {
	case ProbeICMP:
		return "icmp"
	case ProbeTCP:
		return "tcp"
	case ProbeUDP:
		return "udp"
	}
	return fmt.Sprintf("ProbeKind(%d)", int(k))
}

// ParseProbeKind reads the name String returns.
func ParseProbeKind(s string) (ProbeKind, bool) {
	for _, k := range ProbeKinds {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// HasPort tells whether probes of this kind go to a port.
func (k ProbeKind) HasPort() bool { return k == ProbeTCP || k == ProbeUDP }

// Reflector is one probe target: an address, how it is probed, and for
// TCP and UDP the port. Backends exempt exactly this traffic from shaping
// (ICMP to and from the address; TCP or UDP to and from the address's
// port), so that the controller sees the bottleneck's queue, not macake's.
type Reflector struct {
	Kind ProbeKind
	Addr netip.Addr
	// Port is the TCP or UDP port; 0 for ICMP.
	Port uint16
}

// ICMPReflector returns the ICMP reflector at a.
func ICMPReflector(a netip.Addr) Reflector { return Reflector{Kind: ProbeICMP, Addr: a} }

// ICMPReflectors returns an ICMP reflector for each address.
func ICMPReflectors(addrs []netip.Addr) []Reflector {
	out := make([]Reflector, len(addrs))
	for i, a := range addrs {
		out[i] = ICMPReflector(a)
	}
	return out
}

// String returns the form a policy writes: "1.1.1.1" for ICMP,
// "tcp:1.1.1.1:443", "udp:[2001:db8::1]:7".
func (r Reflector) String() string {
	if !r.Kind.HasPort() {
		return r.Addr.String()
	}
	return r.Kind.String() + ":" + netip.AddrPortFrom(r.Addr, r.Port).String()
}

// AddrPort returns the address and port probes go to (port 0 for ICMP).
func (r Reflector) AddrPort() netip.AddrPort { return netip.AddrPortFrom(r.Addr, r.Port) }

// CompareReflectors orders reflectors by family (IPv4 first), address,
// kind and port: the order backends render exemptions in, so that they
// are a function of the set, not of its order.
func CompareReflectors(a, b Reflector) int {
	return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Port, b.Port))
}

// SortedReflectors returns the valid reflectors of rs, unmapped, without
// duplicates, in CompareReflectors order.
func SortedReflectors(rs []Reflector) []Reflector {
	out := make([]Reflector, 0, len(rs))
	for _, r := range rs {
		if !r.Addr.IsValid() {
			continue
		}
		r.Addr = r.Addr.Unmap()
		out = append(out, r)
	}
	slices.SortFunc(out, CompareReflectors)
	return slices.Compact(out)
}

// ReflectorAddrs returns the reflectors' addresses, in order.
func ReflectorAddrs(rs []Reflector) []netip.Addr {
	out := make([]netip.Addr, len(rs))
	for i, r := range rs {
		out[i] = r.Addr
	}
	return out
}

// ParseReflector reads the form String writes: an IP address (ICMP),
// "icmp:ADDR", or "tcp:ADDR:PORT" and "udp:ADDR:PORT" with an IPv6
// address in brackets ("tcp:[2606:4700:4700::1111]:443"). The port is 1 to
// 65535. Errors say what is wrong in words a policy's author can act on.
func ParseReflector(s string) (Reflector, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return ICMPReflector(a), nil
	}
	kind, rest, _ := strings.Cut(s, ":")
	k, known := ParseProbeKind(kind)
	if !known {
		if isWord(kind) && !(isHex(kind) && strings.Count(s, ":") > 1) {
			return Reflector{}, fmt.Errorf("%q: unknown probe kind %q; use icmp, tcp or udp (e.g. \"tcp:1.1.1.1:443\")", s, kind)
		}
		return Reflector{}, fmt.Errorf("%q is not an IP address, nor KIND:ADDRESS[:PORT] with KIND icmp, tcp or udp", s)
	}
	if !k.HasPort() {
		a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(rest, "["), "]"))
		if err != nil {
			return Reflector{}, fmt.Errorf("%q: %q is not an IP address (icmp reflectors take no port)", s, rest)
		}
		return ICMPReflector(a), nil
	}
	ap, err := netip.ParseAddrPort(rest)
	if err != nil {
		if a, aerr := netip.ParseAddr(rest); aerr == nil {
			if a.Is4() {
				return Reflector{}, fmt.Errorf("%q: a %s reflector needs a port, e.g. \"%s:%s:443\"", s, k, k, a)
			}
			return Reflector{}, fmt.Errorf("%q: a %s reflector needs a port, after an IPv6 address in brackets (e.g. \"%s:[2606:4700:4700::1111]:443\")", s, k, k)
		}
		host, port, ok := strings.Cut(rest, "]:")
		if ok && strings.HasPrefix(host, "[") {
			if _, aerr := netip.ParseAddr(host[1:]); aerr == nil {
				return Reflector{}, fmt.Errorf("%q: %q is not a port (1-65535)", s, port)
			}
		}
		if i := strings.LastIndexByte(rest, ':'); i > 0 && !strings.Contains(rest, "[") {
			if a, aerr := netip.ParseAddr(rest[:i]); aerr == nil {
				if a.Is6() {
					return Reflector{}, fmt.Errorf("%q: write an IPv6 address with a port in brackets, e.g. \"%s:[%s]:%s\"", s, k, rest[:i], rest[i+1:])
				}
				return Reflector{}, fmt.Errorf("%q: %q is not a port (1-65535)", s, rest[i+1:])
			}
		}
		return Reflector{}, fmt.Errorf("%q: %q is not ADDRESS:PORT (e.g. \"%s:1.1.1.1:443\", IPv6 in brackets)", s, rest, k)
	}
	if ap.Port() == 0 {
		return Reflector{}, fmt.Errorf("%q: port 0 cannot be probed; use 1-65535", s)
	}
	return Reflector{Kind: k, Addr: ap.Addr(), Port: ap.Port()}, nil
}

// isWord tells whether s is a run of ASCII letters.
func isWord(s string) bool {
	return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == ""
}

// isHex tells whether s could be a group of an IPv6 address.
func isHex(s string) bool {
	return len(s) <= 4 && strings.Trim(s, "0123456789abcdefABCDEF") == ""
}

// MarshalText writes String's form, so that a desired state in JSON reads
// like the policy that produced it.
func (r Reflector) MarshalText() ([]byte, error) {
	if !r.Addr.IsValid() {
		return nil, errors.New("shape: reflector without an address")
	}
	return []byte(r.String()), nil
}

// UnmarshalText reads what MarshalText writes (ParseReflector).
func (r *Reflector) UnmarshalText(text []byte) error {
	v, err := ParseReflector(string(text))
	if err != nil {
		return err
	}
	*r = v
	return nil
}
