// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Device is one network interface as `ip -d -j link show` reports it.
type Device struct {
	Name  string
	Index int
	// Kind is the link type from linkinfo.info_kind ("veth", "ifb", ...);
	// empty for physical devices.
	Kind string
	// Up is the administrative state (the UP flag).
	Up bool
}

// Qdisc is one queueing discipline from `tc -j qdisc show`.
type Qdisc struct {
	// Dev is the device, when the listing covered every device.
	Dev    string
	Kind   string
	Handle uint32
	// Root is true for the device's root (egress) qdisc.
	Root bool
	// Parent is the parent handle of a non-root qdisc, e.g. 4d4b:1.
	Parent uint32
	// Limit is a bfifo's limit in bytes (pfifo: packets).
	Limit int64
	// HTBDefault is an htb root's default class minor number.
	HTBDefault uint32
	// Prio holds a prio qdisc's bands and priomap.
	Prio *PrioOptions
	// Cake holds a cake qdisc's options.
	Cake *CakeOptions
	// Stats are the counters `tc -s` adds; nil without -s.
	Stats *QdiscStats
}

// QdiscStats are a qdisc's counters as `tc -s -j qdisc show` prints them
// (struct gnet_stats_basic and gnet_stats_queue). A root htb counts what
// its classes and leaves did: its drops and backlog include theirs.
type QdiscStats struct {
	// Bytes and Packets were sent (dequeued to the device).
	Bytes, Packets              uint64
	Drops, Overlimits, Requeues uint64
	// Backlog is queued now, in bytes; Qlen in packets.
	Backlog, Qlen uint64
	// Tins are a cake qdisc's tins, in the order tc prints them (lowest
	// priority first); nil for other kinds.
	Tins []CakeTin
}

// CakeTin is one tin of CAKE's statistics as `tc -s -j qdisc show`
// prints it: the rate in bytes/s, the delays in µs, the rest counts.
// "sent_bytes" and "sent_packets" are what entered the tin (CAKE counts
// them as it queues), dropped packets included.
type CakeTin struct {
	ThresholdRate                        uint64 // threshold_rate
	SentBytes, SentPackets               uint64 // sent_bytes, sent_packets
	Drops, ECNMarks, ACKDrops            uint64 // drops, ecn_mark, ack_drops
	BacklogBytes                         uint64 // backlog_bytes
	PeakDelayUs, AvgDelayUs, BaseDelayUs uint64 // peak_delay_us, avg_delay_us, base_delay_us
	SparseFlows, BulkFlows, Unresponsive uint64 // sparse_flows, bulk_flows, unresponsive_flows
}

// fields maps tc's JSON names of a tin's values to where they go (the
// same names iproute2 prints from the netlink attributes, cakeTinAttrs).
func (t *CakeTin) fields() []struct {
	key string
	dst *uint64
} {
	return []struct {
		key string
		dst *uint64
	}{
		{"threshold_rate", &t.ThresholdRate}, {"sent_bytes", &t.SentBytes}, {"sent_packets", &t.SentPackets},
		{"drops", &t.Drops}, {"ecn_mark", &t.ECNMarks}, {"ack_drops", &t.ACKDrops}, {"backlog_bytes", &t.BacklogBytes},
		{"peak_delay_us", &t.PeakDelayUs}, {"avg_delay_us", &t.AvgDelayUs}, {"base_delay_us", &t.BaseDelayUs},
		{"sparse_flows", &t.SparseFlows}, {"bulk_flows", &t.BulkFlows}, {"unresponsive_flows", &t.Unresponsive},
	}
}

// parseQdiscStats reads the counters of one qdisc element, nil when the
// listing was made without -s (no "bytes" member).
func parseQdiscStats(e jvalue) (*QdiscStats, error) {
	if _, ok := e.get("bytes"); !ok {
		return nil, nil
	}
	var s QdiscStats
	for _, f := range []struct {
		key string
		dst *uint64
	}{{"bytes", &s.Bytes}, {"packets", &s.Packets}, {"drops", &s.Drops}, {"overlimits", &s.Overlimits},
		{"requeues", &s.Requeues}, {"backlog", &s.Backlog}, {"qlen", &s.Qlen}} {
		v, _, err := e.getUint(f.key)
		if err != nil {
			return nil, err
		}
		*f.dst = v
	}
	if tins, ok := e.get("tins"); ok && tins.kind == jArray {
		for i, te := range tins.arr {
			var tin CakeTin
			for _, f := range tin.fields() {
				v, _, err := te.getUint(f.key)
				if err != nil {
					return nil, fmt.Errorf("tin %d: %w", i, err)
				}
				*f.dst = v
			}
			s.Tins = append(s.Tins, tin)
		}
	}
	return &s, nil
}

// PrioOptions are a prio qdisc's options as tc -j prints them.
type PrioOptions struct {
	Bands int
	// Priomap maps each of the 16 TC_PRIO values to a band.
	Priomap [16]int
}

// CakeOptions are the options of a cake qdisc as tc -j prints them
// (bandwidth in bytes/s, rtt in µs).
type CakeOptions struct {
	// BandwidthBytes is the shaped rate in bytes/s; 0 means unlimited.
	BandwidthBytes uint64
	Diffserv       string // "diffserv3", "besteffort", ...
	FlowMode       string // "triple-isolate", "dual-srchost", ...
	ACKFilter      string // "enabled", "aggressive", "disabled"
	NAT            bool
	Ingress        bool
	Wash           bool
	SplitGSO       bool
	// RTTMicros is CAKE's rtt (interval) in µs.
	RTTMicros uint32
	// MemLimit is the configured queue memory limit in bytes, 0 when CAKE
	// sizes it itself.
	MemLimit int64
	// ATM is the link layer as tc prints it: "atm", "ptm", "noatm", or ""
	// (tc prints nothing for raw without cells).
	ATM string
	// Raw is true when no overhead compensation is configured.
	Raw      bool
	Overhead int
	MPU      int
}

// linkLayer is the link layer in force: "noatm" when tc printed none.
func (c *CakeOptions) linkLayer() string {
	if c.ATM == "" {
		return "noatm"
	}
	return c.ATM
}

// Class is one class from `tc -d class show`.
type Class struct {
	Kind   string
	Handle uint32
	Root   bool
	Parent uint32
	// Leaf is the handle of the class's leaf qdisc, 0 when none is shown.
	Leaf uint32
	// RateBits and CeilBits are the htb rates in bit/s.
	RateBits, CeilBits int64
	// Exact is true when the rates came from JSON (exact bytes/s) rather
	// than tc's truncated text ("12345Kbit").
	Exact         bool
	Overhead, MPU int
	Quantum       int
}

// Filter is one rule node from `tc -j filter show`. u32 prints a header
// line per priority and per hash table besides the rule itself; those come
// back with Header set.
type Filter struct {
	Protocol string
	Pref     int
	Kind     string
	// Header is true for u32's priority and hash-table lines, which carry
	// no rule.
	Header bool
	// Handle is u32's filter handle, e.g. "800::800".
	Handle  string
	FlowID  string
	Keys    []U32Key
	Actions []Action
}

// U32Key is one 32-bit match of a u32 selector: (packet word at Off) &
// Mask == Value, in host order as tc prints it.
type U32Key struct {
	Off         int
	Value, Mask uint32
}

// Action is one action attached to a filter.
type Action struct {
	Kind string
	// Mirred is mirred's action ("redirect" or "mirror"), Direction its
	// direction ("egress", "ingress"), ToDev its target device.
	Mirred, Direction, ToDev string
}

func parseErr(what string, err error) error {
	return fmt.Errorf("reading %s: %w", what, err)
}

// topArray parses data as a JSON array of objects; empty output is an
// empty array (tc prints nothing when there is nothing to show).
func topArray(what string, data []byte) ([]jvalue, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	v, err := parseJSONTree(data)
	if err != nil {
		return nil, parseErr(what, fmt.Errorf("not JSON: %w", err))
	}
	if v.kind != jArray {
		return nil, parseErr(what, fmt.Errorf("want a JSON array"))
	}
	for i, e := range v.arr {
		if e.kind != jObject {
			return nil, parseErr(what, fmt.Errorf("element %d is not an object", i))
		}
	}
	return v.arr, nil
}

// ParseLinks reads `ip -d -j link show`.
func ParseLinks(data []byte) ([]Device, error) {
	const what = "ip -j link show output"
	arr, err := topArray(what, data)
	if err != nil {
		return nil, err
	}
	out := make([]Device, 0, len(arr))
	for i, e := range arr {
		d := Device{Name: e.getString("ifname")}
		if d.Name == "" {
			return nil, parseErr(what, fmt.Errorf("element %d has no ifname", i))
		}
		idx, _, err := e.getInt("ifindex")
		if err != nil {
			return nil, parseErr(what, fmt.Errorf("%s: %w", d.Name, err))
		}
		d.Index = int(idx)
		if flags, ok := e.get("flags"); ok && flags.kind == jArray {
			for _, f := range flags.arr {
				if f.kind == jString && f.str == "UP" {
					d.Up = true
				}
			}
		}
		if li, ok := e.get("linkinfo"); ok {
			d.Kind = li.getString("info_kind")
		}
		out = append(out, d)
	}
	return out, nil
}

// ParseQdiscs reads `tc [-s] -j qdisc show [dev X]`.
func ParseQdiscs(data []byte) ([]Qdisc, error) {
	const what = "tc -j qdisc show output"
	arr, err := topArray(what, data)
	if err != nil {
		return nil, err
	}
	out := make([]Qdisc, 0, len(arr))
	for i, e := range arr {
		q := Qdisc{Kind: e.getString("kind"), Dev: e.getString("dev"), Root: e.getBool("root")}
		if q.Kind == "" {
			return nil, parseErr(what, fmt.Errorf("element %d has no kind", i))
		}
		if q.Handle, err = ParseHandle(e.getString("handle")); err != nil {
			return nil, parseErr(what, fmt.Errorf("%s qdisc: %w", q.Kind, err))
		}
		if p := e.getString("parent"); p != "" {
			if q.Parent, err = ParseHandle(p); err != nil {
				return nil, parseErr(what, fmt.Errorf("%s qdisc: %w", q.Kind, err))
			}
		}
		if q.Stats, err = parseQdiscStats(e); err != nil {
			return nil, parseErr(what, fmt.Errorf("%s qdisc: %w", q.Kind, err))
		}
		opts, _ := e.get("options")
		switch q.Kind {
		case "bfifo", "pfifo":
			if q.Limit, _, err = opts.getInt("limit"); err != nil {
				return nil, parseErr(what, fmt.Errorf("%s qdisc: %w", q.Kind, err))
			}
		case "htb":
			if d := opts.getString("default"); d != "" {
				v, err := strconv.ParseUint(strings.TrimPrefix(d, "0x"), 16, 32)
				if err != nil {
					return nil, parseErr(what, fmt.Errorf("htb default %q", d))
				}
				q.HTBDefault = uint32(v)
			}
		case "cake":
			if q.Cake, err = parseCakeOptions(opts); err != nil {
				return nil, parseErr(what, fmt.Errorf("cake qdisc: %w", err))
			}
		case "prio":
			if q.Prio, err = parsePrioOptions(opts); err != nil {
				return nil, parseErr(what, fmt.Errorf("prio qdisc: %w", err))
			}
		}
		out = append(out, q)
	}
	return out, nil
}

func parsePrioOptions(o jvalue) (*PrioOptions, error) {
	bands, _, err := o.getInt("bands")
	if err != nil {
		return nil, err
	}
	p := &PrioOptions{Bands: int(bands)}
	if pm, ok := o.get("priomap"); ok && pm.kind == jArray {
		for i, v := range pm.arr {
			if i >= len(p.Priomap) || v.kind != jNumber {
				return nil, fmt.Errorf("priomap %d: not a band number", i)
			}
			n, err := strconv.Atoi(string(v.num))
			if err != nil {
				return nil, fmt.Errorf("priomap %d: %v", i, err)
			}
			p.Priomap[i] = n
		}
	}
	return p, nil
}

func parseCakeOptions(o jvalue) (*CakeOptions, error) {
	c := &CakeOptions{
		Diffserv:  o.getString("diffserv"),
		FlowMode:  o.getString("flowmode"),
		ACKFilter: o.getString("ack-filter"),
		NAT:       o.getBool("nat"),
		Ingress:   o.getBool("ingress"),
		Wash:      o.getBool("wash"),
		SplitGSO:  o.getBool("split_gso"),
		ATM:       o.getString("atm"),
		Raw:       o.getBool("raw"),
	}
	var err error
	if c.MemLimit, _, err = o.getInt("memlimit"); err != nil {
		return nil, err
	}
	rtt, _, err := o.getInt("rtt")
	if err != nil {
		return nil, err
	}
	c.RTTMicros = uint32(rtt)
	if bw, ok := o.get("bandwidth"); ok && bw.kind == jNumber {
		v, err := strconv.ParseUint(string(bw.num), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bandwidth: %v", err)
		}
		c.BandwidthBytes = v
	}
	oh, _, err := o.getInt("overhead")
	if err != nil {
		return nil, err
	}
	mpu, _, err := o.getInt("mpu")
	if err != nil {
		return nil, err
	}
	c.Overhead, c.MPU = int(oh), int(mpu)
	return c, nil
}

// ParseClasses reads `tc -d [-j] class show dev X`. iproute2 up to 6.1
// prints classes as text even with -j; later versions print JSON. Both are
// accepted.
func ParseClasses(data []byte) ([]Class, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, nil
	}
	if trimmed[0] == '[' {
		return parseClassesJSON(data)
	}
	return parseClassesText(string(data))
}

func parseClassesJSON(data []byte) ([]Class, error) {
	const what = "tc -j class show output"
	arr, err := topArray(what, data)
	if err != nil {
		return nil, err
	}
	out := make([]Class, 0, len(arr))
	for i, e := range arr {
		c := Class{Kind: e.getString("class"), Root: e.getBool("root"), Exact: true}
		if c.Kind == "" {
			return nil, parseErr(what, fmt.Errorf("element %d has no class kind", i))
		}
		if c.Handle, err = ParseHandle(e.getString("handle")); err != nil {
			return nil, parseErr(what, err)
		}
		for key, dst := range map[string]*uint32{"parent": &c.Parent, "leaf": &c.Leaf} {
			if s := e.getString(key); s != "" {
				if *dst, err = ParseHandle(s); err != nil {
					return nil, parseErr(what, err)
				}
			}
		}
		for key, dst := range map[string]*int64{"rate": &c.RateBits, "ceil": &c.CeilBits} {
			v, ok := e.get(key)
			switch {
			case !ok:
			case v.kind == jNumber:
				n, err := strconv.ParseUint(string(v.num), 10, 60)
				if err != nil {
					return nil, parseErr(what, fmt.Errorf("%s: %v", key, err))
				}
				*dst = int64(n) * 8
			case v.kind == jString:
				if *dst, err = parseTCRate(v.str); err != nil {
					return nil, parseErr(what, err)
				}
				c.Exact = false
			}
		}
		for key, dst := range map[string]*int{"overhead": &c.Overhead, "mpu_rate": &c.MPU, "quantum": &c.Quantum} {
			n, _, err := e.getInt(key)
			if err != nil {
				return nil, parseErr(what, err)
			}
			*dst = int(n)
		}
		out = append(out, c)
	}
	return out, nil
}

func parseClassesText(s string) ([]Class, error) {
	const what = "tc class show output"
	var out []Class
	for lineNo, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "class" {
			continue // statistics lines start with a blank
		}
		bad := func(err error) error {
			return parseErr(what, fmt.Errorf("line %d: %w", lineNo+1, err))
		}
		if len(f) < 3 {
			return nil, bad(fmt.Errorf("short class line %q", line))
		}
		c := Class{Kind: f[1]}
		var err error
		if c.Handle, err = ParseHandle(f[2]); err != nil {
			return nil, bad(err)
		}
		seenMPU := false
		for i := 3; i < len(f); i++ {
			arg := func() (string, error) {
				if i+1 >= len(f) {
					return "", fmt.Errorf("%q without a value", f[i])
				}
				i++
				return f[i], nil
			}
			var v string
			switch f[i] {
			case "root":
				c.Root = true
			case "parent", "leaf":
				key := f[i]
				if v, err = arg(); err != nil {
					return nil, bad(err)
				}
				h, err := ParseHandle(v)
				if err != nil {
					return nil, bad(err)
				}
				if key == "parent" {
					c.Parent = h
				} else {
					c.Leaf = h
				}
			case "rate", "ceil":
				key := f[i]
				if v, err = arg(); err != nil {
					return nil, bad(err)
				}
				r, err := parseTCRate(v)
				if err != nil {
					return nil, bad(err)
				}
				if key == "rate" {
					c.RateBits = r
				} else {
					c.CeilBits = r
				}
			case "overhead", "quantum":
				key := f[i]
				if v, err = arg(); err != nil {
					return nil, bad(err)
				}
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, bad(fmt.Errorf("%s %q", key, v))
				}
				if key == "overhead" {
					c.Overhead = n
				} else {
					c.Quantum = n
				}
			case "mpu":
				// htb prints "mpu" twice with -d: the rate's, then the ceil's.
				if v, err = arg(); err != nil {
					return nil, bad(err)
				}
				n, err := parseTCSize(v)
				if err != nil {
					return nil, bad(err)
				}
				if !seenMPU {
					c.MPU, seenMPU = int(n), true
				}
			case "prio", "burst", "cburst", "linklayer", "level", "buffer", "cbuffer", "quantum_", "weight":
				if _, err = arg(); err != nil {
					return nil, bad(err)
				}
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// ParseFilters reads `tc -j filter show dev X (ingress | parent P)`.
func ParseFilters(data []byte) ([]Filter, error) {
	const what = "tc -j filter show output"
	arr, err := topArray(what, data)
	if err != nil {
		return nil, err
	}
	out := make([]Filter, 0, len(arr))
	for i, e := range arr {
		f := Filter{Protocol: e.getString("protocol"), Kind: e.getString("kind")}
		pref, _, err := e.getInt("pref")
		if err != nil {
			return nil, parseErr(what, fmt.Errorf("element %d: %w", i, err))
		}
		f.Pref = int(pref)
		opts, hasOpts := e.get("options")
		f.Handle = opts.getString("fh")
		f.FlowID = opts.getString("flowid")
		if f.FlowID == "" {
			f.FlowID = opts.getString("classid")
		}
		for _, m := range opts.all("match") {
			k, err := parseU32Key(m)
			if err != nil {
				return nil, parseErr(what, fmt.Errorf("pref %d: %w", f.Pref, err))
			}
			f.Keys = append(f.Keys, k)
		}
		if acts, ok := opts.get("actions"); ok && acts.kind == jArray {
			for _, a := range acts.arr {
				f.Actions = append(f.Actions, Action{
					Kind:      a.getString("kind"),
					Mirred:    a.getString("mirred_action"),
					Direction: a.getString("direction"),
					ToDev:     a.getString("to_dev"),
				})
			}
		}
		// u32 prints its priority and hash-table nodes as separate lines.
		f.Header = !hasOpts || (f.Kind == "u32" && len(f.Keys) == 0 && len(f.Actions) == 0 && f.FlowID == "")
		out = append(out, f)
	}
	return out, nil
}

func parseU32Key(m jvalue) (U32Key, error) {
	if m.kind != jObject {
		return U32Key{}, fmt.Errorf("u32 match is not an object")
	}
	var k U32Key
	for key, dst := range map[string]*uint32{"value": &k.Value, "mask": &k.Mask} {
		s := strings.TrimPrefix(m.getString(key), "0x")
		v, err := strconv.ParseUint(s, 16, 32)
		if err != nil {
			return U32Key{}, fmt.Errorf("u32 match %s %q is not hex", key, m.getString(key))
		}
		*dst = uint32(v)
	}
	off, _, err := m.getInt("off")
	if err != nil {
		return U32Key{}, fmt.Errorf("u32 match: %w", err)
	}
	k.Off = int(off)
	return k, nil
}
