// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/macake/macake/shape"
)

// Reflector is one entry of [autorate] reflectors: where to probe and how.
//
//	"1.1.1.1"                          ICMP (a plain address; also "icmp:1.1.1.1")
//	"tcp:1.1.1.1:443"                  TCP handshake time to port 443
//	"udp:192.0.2.7:7"                  UDP echo from port 7
//	"auto:1.1.1.1:443"                 ICMP, or TCP to 443 if measure chose TCP
//	"tcp:[2606:4700:4700::1111]:443"   IPv6 with a port, in brackets
//
// Networks that police or prioritise ICMP show a flat ICMP latency while
// the user's traffic queues; a TCP handshake or a UDP datagram rides with
// that traffic. `auto` lets `macake measure` compare the two on the link
// and record which one sees the bloat (state.Profile.ProbeKind).
type Reflector struct {
	// Reflector is the probe target. For an auto entry it is the TCP
	// probe measure compares with ICMP (see Resolve).
	shape.Reflector
	// Auto marks an "auto:" entry.
	Auto bool
}

// ParseReflector reads one entry of [autorate] reflectors (see Reflector)
// with the errors a policy's author can act on.
func ParseReflector(s string) (Reflector, error) {
	if rest, ok := strings.CutPrefix(s, "auto:"); ok {
		r, err := shape.ParseReflector("tcp:" + rest)
		if err != nil {
			if _, aerr := netip.ParseAddr(rest); aerr == nil {
				return Reflector{}, fmt.Errorf("%q: an auto reflector names the TCP port measure compares ICMP with, e.g. %q", s, "auto:"+netip.AddrPortFrom(netip.MustParseAddr(rest), 443).String())
			}
			msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("%q: ", "tcp:"+rest))
			return Reflector{}, fmt.Errorf("%q: %s", s, strings.ReplaceAll(msg, `"tcp:`, `"auto:`))
		}
		return Reflector{Reflector: r, Auto: true}, nil
	}
	r, err := shape.ParseReflector(s)
	if err != nil {
		if strings.Contains(err.Error(), "unknown probe kind") {
			err = fmt.Errorf("%s, or auto", strings.TrimSuffix(err.Error(), ` (e.g. "tcp:1.1.1.1:443")`))
		} else if !strings.Contains(s, ":") && strings.IndexFunc(s, func(c rune) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }) >= 0 && strings.Contains(s, ".") {
			err = fmt.Errorf("%q is a host name; write an IP address (macake never resolves names, so shaping never depends on DNS)", s)
		}
		return Reflector{}, err
	}
	return Reflector{Reflector: r}, nil
}

// UnmarshalText implements encoding.TextUnmarshaler (ParseReflector).
func (r *Reflector) UnmarshalText(text []byte) error {
	v, err := ParseReflector(string(text))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// MarshalText writes the policy form String returns.
func (r Reflector) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// String returns the entry as a policy writes it.
func (r Reflector) String() string {
	if r.Auto {
		return "auto:" + r.AddrPort().String()
	}
	return r.Reflector.String()
}

// Resolve returns how the reflector is probed on a link where measure
// chose kind for auto reflectors (ICMP when it chose nothing yet).
func (r Reflector) Resolve(kind shape.ProbeKind) shape.Reflector {
	if r.Auto && kind != shape.ProbeTCP {
		return shape.ICMPReflector(r.Addr)
	}
	return r.Reflector
}

// ICMPReflectors returns plain ICMP entries for addrs.
func ICMPReflectors(addrs []netip.Addr) []Reflector {
	out := make([]Reflector, len(addrs))
	for i, a := range addrs {
		out[i] = Reflector{Reflector: shape.ICMPReflector(a)}
	}
	return out
}

// Addrs returns the reflectors' addresses in order: the identities the
// controller keeps per-reflector statistics under (an address is listed
// once per policy).
func (a Autorate) Addrs() []netip.Addr {
	out := make([]netip.Addr, len(a.Reflectors))
	for i, r := range a.Reflectors {
		out[i] = r.Addr
	}
	return out
}

// Probes returns every reflector as probed on a link where measure chose
// kind for the auto reflectors (see Reflector.Resolve).
func (a Autorate) Probes(kind shape.ProbeKind) []shape.Reflector {
	out := make([]shape.Reflector, len(a.Reflectors))
	for i, r := range a.Reflectors {
		out[i] = r.Resolve(kind)
	}
	return out
}

// HasAuto tells whether any reflector is an auto entry, for which measure
// compares ICMP with TCP.
func (a Autorate) HasAuto() bool {
	for _, r := range a.Reflectors {
		if r.Auto {
			return true
		}
	}
	return false
}
