// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"fmt"
	"hash/fnv"
	"net/netip"
)

// Packet is one packet offered to the emulated pf for a traffic probe.
type Packet struct {
	// Interface is where the packet crosses pf, e.g. "en0".
	Interface string
	// Out is true for outbound (upload), false for inbound (download).
	Out bool
	// Proto is "tcp", "udp", "icmp" or "ipv6-icmp".
	Proto string
	Src   netip.AddrPort
	Dst   netip.AddrPort
	// Bytes is the packet length (default 1500).
	Bytes int
	// Held leaves a shaped packet in the pipe's queue, as when it arrives
	// faster than the pipe's rate: it counts in the flow's queued Pkt/Byte
	// until Drain, or, when the queue is full, is dropped (Drp).
	Held bool
}

// Verdict is what dummynet did with a probed packet.
type Verdict int

// The verdicts.
const (
	// Unshaped: no dummynet rule sent the packet anywhere.
	Unshaped Verdict = iota
	// Shaped: the packet went through an existing pipe.
	Shaped
	// Blackholed: a rule named a pipe (or queue) that does not exist, and
	// the kernel silently freed the packet (reference §2.3).
	Blackholed
	// Panic: the packet reached a dummynet queue (flow set), which on
	// current kernels can panic the Mac (reference §7).
	Panic
)

// String names the verdict.
func (v Verdict) String() string {
	return [...]string{"unshaped", "shaped", "blackholed", "kernel panic risk"}[v]
}

// ProbeResult describes how the emulated kernel handled a probe.
type ProbeResult struct {
	Verdict Verdict
	// Pipe is the pipe (or queue) number the deciding rule names.
	Pipe int
	// Rule is the deciding rule, "" when none matched.
	Rule   string
	Reason string
}

// Probe sends one packet through the emulated pf dummynet evaluation
// (reference §2.2, §2.3, §2.8): pf must be enabled, dummynet loaded and the
// main dummynet list non-empty; the last matching rule wins unless one is
// quick; anchors are stepped into (wildcards over every child, in name
// order). A shaped packet is counted in the pipe's flow queue, so `dnctl
// list` shows it, and the rules' -v counters move.
func (e *Emulator) Probe(pkt Packet) ProbeResult {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.m
	if pkt.Bytes == 0 {
		pkt.Bytes = 1500
	}
	switch {
	case !m.PF.Enabled:
		return ProbeResult{Verdict: Unshaped, Reason: "pf is disabled"}
	case !m.Dummynet.Loaded:
		return ProbeResult{Verdict: Unshaped, Reason: "dummynet is not loaded yet (no dnctl call since boot)"}
	case len(m.Rulesets[""].Rules[TypeDummynet]) == 0:
		return ProbeResult{Verdict: Unshaped, Reason: "the main ruleset has no dummynet rules"}
	}
	ev := evaluation{m: m, pkt: pkt}
	ev.walk("", 0)
	if ev.match == nil {
		return ProbeResult{Verdict: Unshaped, Reason: "no dummynet rule matched"}
	}
	r := *ev.match
	res := ProbeResult{Rule: r.String(), Pipe: r.Pipe}
	if r.Action == "no dummynet" || r.Pipe == 0 {
		res.Verdict, res.Reason = Unshaped, "exempt by a no dummynet rule"
		return res
	}
	if r.PipeKind == "queue" {
		q := m.queue(uint16(r.Pipe))
		switch {
		case q == nil:
			res.Verdict, res.Reason = Blackholed, fmt.Sprintf("queue %d does not exist", r.Pipe)
		case m.pipe(q.Parent) == nil:
			res.Verdict, res.Reason = Blackholed, fmt.Sprintf("dummynet: no pipe %d for queue %d, drop pkt", q.Parent, r.Pipe)
		default:
			res.Verdict, res.Reason = Panic, "flow sets can panic xnu-11417 (reference §7)"
		}
		return res
	}
	p := m.pipe(int32(r.Pipe & 0xffff))
	if p == nil {
		res.Verdict, res.Reason = Blackholed, fmt.Sprintf("pipe %d does not exist: the packet is freed", r.Pipe)
		return res
	}
	account(&p.FS, pkt)
	res.Verdict, res.Reason = Shaped, fmt.Sprintf("pipe %d", r.Pipe)
	return res
}

type evaluation struct {
	m     *Machine
	pkt   Packet
	match *Rule
	quick bool
}

// walk evaluates ruleset path's dummynet list.
func (ev *evaluation) walk(path string, depth int) {
	rs := ev.m.Rulesets[path]
	if rs == nil || depth > 16 {
		return
	}
	list := rs.Rules[TypeDummynet]
	for i := range list {
		if ev.quick {
			return
		}
		r := &list[i]
		r.Evaluations++
		if !ev.matches(r) {
			continue
		}
		if r.isAnchorRule() {
			target, wildcard := resolveAnchor(path, r.Anchor)
			if wildcard {
				for _, child := range ev.m.children(target) {
					ev.walk(child, depth+1)
				}
			} else {
				ev.walk(target, depth+1)
			}
			continue
		}
		r.Packets++
		r.Bytes += uint64(ev.pkt.Bytes)
		ev.match = r
		if r.Quick {
			ev.quick = true
		}
	}
}

func (ev *evaluation) matches(r *Rule) bool {
	p := ev.pkt
	if r.Direction == "in" && p.Out || r.Direction == "out" && !p.Out {
		return false
	}
	if r.Interface != "" && (r.Interface == p.Interface) == r.IfNot {
		return false
	}
	v4 := p.Src.Addr().Is4()
	if r.AF == "inet" && !v4 || r.AF == "inet6" && v4 {
		return false
	}
	if r.Proto != "" && r.Proto != p.Proto {
		return false
	}
	return addrMatches(r.From, p.Src) && addrMatches(r.To, p.Dst)
}

func addrMatches(a Addr, ap netip.AddrPort) bool {
	if a.Prefix.IsValid() {
		in := a.Prefix.Addr().BitLen() == ap.Addr().BitLen() && a.Prefix.Contains(ap.Addr())
		if in == a.Not {
			return false
		}
	}
	port := int(ap.Port())
	switch a.PortOp {
	case "":
		return true
	case "=":
		return port == a.Port1
	case "!=":
		return port != a.Port1
	case "<":
		return port < a.Port1
	case "<=":
		return port <= a.Port1
	case ">":
		return port > a.Port1
	case ">=":
		return port >= a.Port1
	case ":":
		return port >= a.Port1 && port <= a.Port2
	case "><":
		return port > a.Port1 && port < a.Port2
	case "<>":
		return port < a.Port1 || port > a.Port2
	}
	return false
}

// account counts a packet in a flow queue. Without a mask there is one
// queue, identified by the first packet's 5-tuple (reference §1.7).
func account(fs *FlowSet, pkt Packet) {
	proto := map[string]uint8{"icmp": 1, "tcp": 6, "udp": 17, "ipv6-icmp": 58}[pkt.Proto]
	key := Flow{Proto: proto, Src: pkt.Src.Addr(), Dst: pkt.Dst.Addr(), SrcPort: pkt.Src.Port(), DstPort: pkt.Dst.Port()}
	if fs.HasMask {
		key = maskFlow(key, fs.Mask)
	}
	for i := range fs.Flows {
		f := &fs.Flows[i]
		if !fs.HasMask || f.Proto == key.Proto && f.Src == key.Src && f.Dst == key.Dst && f.SrcPort == key.SrcPort && f.DstPort == key.DstPort {
			f.TotPkts++
			f.TotBytes += uint64(pkt.Bytes)
			enqueue(fs, f, pkt)
			return
		}
	}
	if fs.HasMask && fs.RqSize > 0 {
		h := fnv.New32a()
		fmt.Fprintf(h, "%v", key)
		key.Slot = int(h.Sum32() % uint32(fs.RqSize))
	}
	key.TotPkts, key.TotBytes = 1, uint64(pkt.Bytes)
	enqueue(fs, &key, pkt)
	fs.Flows = append(fs.Flows, key)
}

func maskFlow(f Flow, mk FlowMask) Flow {
	f.Proto &= mk.Proto
	f.SrcPort &= mk.SrcPort
	f.DstPort &= mk.DstPort
	if f.Src.Is4() {
		f.Src = maskV4(f.Src, mk.SrcIP)
		f.Dst = maskV4(f.Dst, mk.DstIP)
	} else {
		f.Src = maskV6(f.Src, mk.SrcIP6Bits)
		f.Dst = maskV6(f.Dst, mk.DstIP6Bits)
	}
	return f
}

func maskV4(a netip.Addr, mask uint32) netip.Addr {
	b := a.As4()
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) & mask
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func maskV6(a netip.Addr, bits int) netip.Addr {
	p, err := a.Prefix(bits)
	if err != nil {
		return netip.IPv6Unspecified()
	}
	return p.Addr()
}
