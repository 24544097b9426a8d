// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
)

// The live state read over rtnetlink (Netlink.Observe, Linux): the same
// Live that Observe builds from `ip -j` and `tc -j`, decoded from the
// kernel's dump messages as iproute2 decodes them for printing, so that
// the two readings are equal (a kernel test checks it). Only what Live
// holds is decoded; every other attribute, and every kind macake has no
// use for, is skipped, so a foreign qdisc or filter of any kind never
// makes a reading fail. This file decodes without touching the kernel.

// Kernel constants (include/uapi/linux/{rtnetlink,if_link,pkt_sched,
// pkt_cls,gen_stats,tc_act/tc_mirred}.h).
const (
	sizeofTcmsg     = 20
	sizeofIfinfomsg = 16

	iflaIfname   = 3
	iflaLinkinfo = 18
	iflaInfoKind = 1
	iffUp        = 0x1

	tcaKind    = 1
	tcaOptions = 2
	tcaStats2  = 7

	tcaStatsBasic = 1
	tcaStatsQueue = 3
	tcaStatsApp   = 4

	// CAKE's statistics in tcaStatsApp (TCA_CAKE_STATS_*, and each tin's
	// TCA_CAKE_TIN_STATS_*).
	tcaCakeStatsTinStats = 10

	tcaHTBParms  = 1
	tcaHTBInit   = 2
	tcaHTBRate64 = 6

	tcaU32Classid = 1
	tcaU32Sel     = 5
	tcaU32Act     = 7

	tcaActKind    = 1
	tcaActOptions = 2
	tcaMirredParm = 2

	tcaCakeBaseRate64   = 2
	tcaCakeDiffservMode = 3
	tcaCakeATM          = 4
	tcaCakeFlowMode     = 5
	tcaCakeOverhead     = 6
	tcaCakeRTT          = 7
	tcaCakeMemory       = 10
	tcaCakeNAT          = 11
	tcaCakeRaw          = 12
	tcaCakeWash         = 13
	tcaCakeMPU          = 14
	tcaCakeIngress      = 15
	tcaCakeAckFilter    = 16
	tcaCakeSplitGSO     = 17

	// sizeofPrioQopt is struct tc_prio_qopt: int bands, __u8 priomap[16].
	sizeofPrioQopt = 20

	tcHRoot = 0xffffffff

	ethPAll  = 0x0003
	ethPIP   = 0x0800
	ethPIPv6 = 0x86dd
)

// tcmsg is struct tcmsg.
type tcmsg struct {
	ifindex              int32
	handle, parent, info uint32
}

func parseTcmsg(b []byte) (tcmsg, []byte, error) {
	if len(b) < sizeofTcmsg {
		return tcmsg{}, nil, fmt.Errorf("tcmsg of %d bytes", len(b))
	}
	ne := binary.NativeEndian
	return tcmsg{ifindex: int32(ne.Uint32(b[4:])), handle: ne.Uint32(b[8:]), parent: ne.Uint32(b[12:]), info: ne.Uint32(b[16:])},
		b[sizeofTcmsg:], nil
}

// decodeLink decodes one RTM_NEWLINK message as `ip -d -j link show`
// reports it.
func decodeLink(data []byte) (Device, error) {
	if len(data) < sizeofIfinfomsg {
		return Device{}, fmt.Errorf("ifinfomsg of %d bytes", len(data))
	}
	ne := binary.NativeEndian
	d := Device{Index: int(int32(ne.Uint32(data[4:]))), Up: ne.Uint32(data[8:])&iffUp != 0}
	ad, err := netlink.NewAttributeDecoder(data[sizeofIfinfomsg:])
	if err != nil {
		return d, err
	}
	for ad.Next() {
		switch ad.Type() {
		case iflaIfname:
			d.Name = ad.String()
		case iflaLinkinfo:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					if nad.Type() == iflaInfoKind {
						d.Kind = nad.String()
					}
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return d, err
	}
	if d.Name == "" {
		return d, fmt.Errorf("link %d has no name", d.Index)
	}
	return d, nil
}

// tcAttrs are the common attributes of a qdisc, class or filter message.
type tcAttrs struct {
	kind    string
	options []byte
	hasOpts bool
	stats   *QdiscStats
	// app is the qdisc's own statistics (TCA_STATS_APP), which only its
	// kind can decode.
	app []byte
}

func decodeTcAttrs(b []byte) (tcAttrs, error) {
	var a tcAttrs
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return a, err
	}
	for ad.Next() {
		switch ad.Type() {
		case tcaKind:
			a.kind = ad.String()
		case tcaOptions:
			a.options, a.hasOpts = ad.Bytes(), true
		case tcaStats2:
			a.stats = &QdiscStats{}
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					v := nad.Bytes()
					switch nad.Type() {
					case tcaStatsBasic: // struct gnet_stats_basic: u64 bytes, u32 packets
						if len(v) >= 12 {
							a.stats.Bytes = binary.NativeEndian.Uint64(v)
							a.stats.Packets = uint64(binary.NativeEndian.Uint32(v[8:]))
						}
					case tcaStatsQueue: // struct gnet_stats_queue: qlen, backlog, drops, requeues, overlimits
						if len(v) >= 20 {
							ne := binary.NativeEndian
							a.stats.Qlen, a.stats.Backlog, a.stats.Drops = uint64(ne.Uint32(v)), uint64(ne.Uint32(v[4:])), uint64(ne.Uint32(v[8:]))
							a.stats.Requeues, a.stats.Overlimits = uint64(ne.Uint32(v[12:])), uint64(ne.Uint32(v[16:]))
						}
					case tcaStatsApp:
						a.app = v
					}
				}
				return nil
			})
		}
	}
	return a, ad.Err()
}

// decodeQdisc decodes one RTM_NEWQDISC message; dev names its device.
// withStats keeps the counters (`tc -s`).
func decodeQdisc(data []byte, dev string, withStats bool) (Qdisc, error) {
	m, rest, err := parseTcmsg(data)
	if err != nil {
		return Qdisc{}, err
	}
	a, err := decodeTcAttrs(rest)
	if err != nil {
		return Qdisc{}, err
	}
	q := Qdisc{Dev: dev, Kind: a.kind, Handle: m.handle}
	if m.parent == tcHRoot {
		q.Root = true
	} else {
		q.Parent = m.parent
	}
	if withStats {
		q.Stats = a.stats
		if q.Stats != nil && q.Kind == "cake" && a.app != nil {
			if q.Stats.Tins, err = decodeCakeTins(a.app); err != nil {
				return q, fmt.Errorf("cake qdisc %s on %s: its statistics: %w", FormatHandle(q.Handle), dev, err)
			}
		}
	}
	if !a.hasOpts {
		return q, nil
	}
	switch q.Kind {
	case "bfifo", "pfifo":
		// struct tc_fifo_qopt, not nested.
		if len(a.options) >= 4 {
			q.Limit = int64(binary.NativeEndian.Uint32(a.options))
		}
	case "htb":
		err = eachAttr(a.options, func(t uint16, v []byte) {
			if t == tcaHTBInit && len(v) >= 12 { // struct tc_htb_glob: version, rate2quantum, defcls
				q.HTBDefault = binary.NativeEndian.Uint32(v[8:])
			}
		})
	case "cake":
		q.Cake, err = decodeCake(a.options)
	case "prio":
		// struct tc_prio_qopt, not nested (attributes may follow).
		if len(a.options) >= sizeofPrioQopt {
			q.Prio = &PrioOptions{Bands: int(int32(binary.NativeEndian.Uint32(a.options)))}
			for i := range q.Prio.Priomap {
				q.Prio.Priomap[i] = int(a.options[4+i])
			}
		}
	}
	if err != nil {
		return q, fmt.Errorf("%s qdisc %s on %s: %w", q.Kind, FormatHandle(q.Handle), dev, err)
	}
	return q, nil
}

// eachAttr calls fn with each attribute of b.
func eachAttr(b []byte, fn func(typ uint16, v []byte)) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return err
	}
	for ad.Next() {
		fn(ad.Type(), ad.Bytes())
	}
	return ad.Err()
}

// The names tc prints for CAKE's enums (cakeDiffserv and cakeFlowMode
// are the other way round).
var (
	cakeDiffservNames = []string{"diffserv3", "diffserv4", "diffserv8", "besteffort", "precedence"}
	cakeFlowModeNames = []string{"flowblind", "srchost", "dsthost", "hosts", "flows", "dual-srchost", "dual-dsthost", "triple-isolate"}
	cakeAckNames      = []string{"disabled", "enabled", "aggressive"}
	cakeATMNames      = []string{"noatm", "atm", "ptm"}
)

// decodeCake decodes cake's options as tc prints them: the enums by name,
// raw when the kernel says so, the overhead and mpu as numbers.
func decodeCake(b []byte) (*CakeOptions, error) {
	c := &CakeOptions{}
	atm := "noatm"
	name := func(names []string, v uint32) string {
		if int(v) < len(names) {
			return names[v]
		}
		return fmt.Sprint(v)
	}
	err := eachAttr(b, func(t uint16, v []byte) {
		var u uint32
		if len(v) >= 4 {
			u = binary.NativeEndian.Uint32(v)
		}
		switch t {
		case tcaCakeBaseRate64:
			if len(v) >= 8 {
				c.BandwidthBytes = binary.NativeEndian.Uint64(v)
			}
		case tcaCakeDiffservMode:
			c.Diffserv = name(cakeDiffservNames, u)
		case tcaCakeFlowMode:
			c.FlowMode = name(cakeFlowModeNames, u)
		case tcaCakeAckFilter:
			c.ACKFilter = name(cakeAckNames, u)
		case tcaCakeNAT:
			c.NAT = u != 0
		case tcaCakeIngress:
			c.Ingress = u != 0
		case tcaCakeRaw:
			c.Raw = true
		case tcaCakeOverhead:
			c.Overhead = int(int32(u))
		case tcaCakeMPU:
			c.MPU = int(u)
		case tcaCakeWash:
			c.Wash = u != 0
		case tcaCakeSplitGSO:
			c.SplitGSO = u != 0
		case tcaCakeRTT:
			c.RTTMicros = u
		case tcaCakeMemory:
			c.MemLimit = int64(u)
		case tcaCakeATM:
			atm = name(cakeATMNames, u)
		}
	})
	// tc prints no link layer for raw without cells.
	if atm != "noatm" || !c.Raw {
		c.ATM = atm
	}
	return c, err
}

// cakeTinAttrs maps the TCA_CAKE_TIN_STATS_* attributes macake reads to
// the JSON names iproute2 prints them under (CakeTin.fields).
var cakeTinAttrs = map[uint16]string{
	2: "sent_packets", 3: "sent_bytes", 4: "drops", 6: "ack_drops", 8: "ecn_mark", 11: "backlog_bytes",
	12: "threshold_rate", 18: "peak_delay_us", 19: "avg_delay_us", 20: "base_delay_us",
	21: "sparse_flows", 22: "bulk_flows", 23: "unresponsive_flows",
}

// decodeCakeTins decodes the tins of CAKE's statistics (TCA_STATS_APP):
// TCA_CAKE_STATS_TIN_STATS nests one attribute per tin, numbered from 1
// in the order tc prints them, each holding u32 or u64 values.
func decodeCakeTins(app []byte) ([]CakeTin, error) {
	var tins []CakeTin
	var inner error
	err := eachAttr(app, func(t uint16, v []byte) {
		if t != tcaCakeStatsTinStats || inner != nil {
			return
		}
		inner = eachAttr(v, func(_ uint16, tv []byte) {
			var tin CakeTin
			dst := map[string]*uint64{}
			for _, f := range tin.fields() {
				dst[f.key] = f.dst
			}
			if err := eachAttr(tv, func(a uint16, val []byte) {
				p := dst[cakeTinAttrs[a]]
				switch {
				case p == nil:
				case len(val) >= 8:
					*p = binary.NativeEndian.Uint64(val)
				case len(val) >= 4:
					*p = uint64(binary.NativeEndian.Uint32(val))
				}
			}); err != nil && inner == nil {
				inner = err
			}
			tins = append(tins, tin)
		})
	})
	if err == nil {
		err = inner
	}
	return tins, err
}

// decodeClass decodes one RTM_NEWTCLASS message as `tc -d -j class show`
// reports it (the rates exact, in bytes per second, as iproute2's JSON).
func decodeClass(data []byte) (Class, error) {
	m, rest, err := parseTcmsg(data)
	if err != nil {
		return Class{}, err
	}
	a, err := decodeTcAttrs(rest)
	if err != nil {
		return Class{}, err
	}
	c := Class{Kind: a.kind, Handle: m.handle, Leaf: m.info, Exact: true}
	if m.parent == tcHRoot {
		c.Root = true
	} else {
		c.Parent = m.parent
	}
	if c.Kind != "htb" || !a.hasOpts {
		return c, nil
	}
	var rate64, ceil64 uint64
	err = eachAttr(a.options, func(t uint16, v []byte) {
		ne := binary.NativeEndian
		switch {
		case t == tcaHTBParms && len(v) >= 32:
			// struct tc_htb_opt: tc_ratespec rate and ceil (cell_log u8,
			// linklayer u8, overhead u16, cell_align s16, mpu u16, rate
			// u32), buffer, cbuffer, quantum, …
			c.Overhead, c.MPU = int(ne.Uint16(v[2:])), int(ne.Uint16(v[6:]))
			c.RateBits, c.CeilBits = int64(ne.Uint32(v[8:]))*8, int64(ne.Uint32(v[20:]))*8
			c.Quantum = int(ne.Uint32(v[32:]))
		case t == tcaHTBRate64 && len(v) >= 8:
			rate64 = ne.Uint64(v)
		case t == tcaHTBRate64+1 && len(v) >= 8: // TCA_HTB_CEIL64
			ceil64 = ne.Uint64(v)
		}
	})
	if rate64 != 0 {
		c.RateBits = int64(rate64) * 8
	}
	if ceil64 != 0 {
		c.CeilBits = int64(ceil64) * 8
	}
	return c, err
}

// decodeFilter decodes one RTM_NEWTFILTER message as `tc -j filter show`
// reports it; devName names an interface index (a mirred target).
func decodeFilter(data []byte, devName func(int) string) (Filter, error) {
	m, rest, err := parseTcmsg(data)
	if err != nil {
		return Filter{}, err
	}
	a, err := decodeTcAttrs(rest)
	if err != nil {
		return Filter{}, err
	}
	f := Filter{Kind: a.kind, Pref: int(m.info >> 16), Protocol: protocolName(uint16(m.info))}
	if !a.hasOpts {
		// The priority's own line: no options.
		f.Header = true
		return f, nil
	}
	if f.Kind == "u32" {
		f.Handle = formatU32Handle(m.handle)
		err = eachAttr(a.options, func(t uint16, v []byte) {
			switch t {
			case tcaU32Classid:
				if len(v) >= 4 {
					f.FlowID = formatClassid(binary.NativeEndian.Uint32(v))
				}
			case tcaU32Sel:
				f.Keys = decodeU32Keys(v)
			case tcaU32Act:
				f.Actions = decodeActions(v, devName)
			}
		})
	}
	f.Header = f.Kind == "u32" && len(f.Keys) == 0 && len(f.Actions) == 0 && f.FlowID == ""
	return f, err
}

// decodeU32Keys reads the keys of a struct tc_u32_sel (flags, offshift,
// nkeys, pad; offmask, off, offoff, hoff, hmask: 16 bytes) followed by
// nkeys struct tc_u32_key (mask, val: network order; off, offmask), in
// host order as tc prints them.
func decodeU32Keys(v []byte) []U32Key {
	if len(v) < 16 {
		return nil
	}
	n := int(v[2])
	var keys []U32Key
	for i := 0; i < n && 16+16*(i+1) <= len(v); i++ {
		k := v[16+16*i:]
		keys = append(keys, U32Key{
			Mask:  binary.BigEndian.Uint32(k),
			Value: binary.BigEndian.Uint32(k[4:]),
			Off:   int(int32(binary.NativeEndian.Uint32(k[8:]))),
		})
	}
	return keys
}

// decodeActions reads a filter's actions (one nested attribute each, in
// order): the kind, and for mirred its action, direction and target.
func decodeActions(v []byte, devName func(int) string) []Action {
	var acts []Action
	eachAttr(v, func(_ uint16, act []byte) {
		var a Action
		var opts []byte
		eachAttr(act, func(t uint16, b []byte) {
			switch t {
			case tcaActKind:
				a.Kind = nulTrimmed(b)
			case tcaActOptions:
				opts = b
			}
		})
		if a.Kind == "mirred" {
			eachAttr(opts, func(t uint16, b []byte) {
				// struct tc_mirred: tc_gen (index, capab, action,
				// refcnt, bindcnt), eaction, ifindex.
				if t != tcaMirredParm || len(b) < 28 {
					return
				}
				ne := binary.NativeEndian
				eaction, ifindex := ne.Uint32(b[20:]), int(ne.Uint32(b[24:]))
				a.Mirred, a.Direction = mirredNames(eaction)
				a.ToDev = "*"
				if ifindex != 0 {
					a.ToDev = devName(ifindex)
				}
			})
		}
		acts = append(acts, a)
	})
	return acts
}

// mirredNames are tc's words for a mirred eaction (TCA_EGRESS_REDIR 1,
// TCA_EGRESS_MIRROR 2, TCA_INGRESS_REDIR 3, TCA_INGRESS_MIRROR 4).
func mirredNames(eaction uint32) (action, direction string) {
	action, direction = "mirror", "egress"
	if eaction == 1 || eaction == 3 {
		action = "redirect"
	}
	if eaction == 3 || eaction == 4 {
		direction = "ingress"
	}
	return action, direction
}

func nulTrimmed(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// protocolName is tc's name of a filter's protocol, kept in network
// order in tcm_info's low 16 bits: the ones macake writes by name, any
// other as its number.
func protocolName(p uint16) string {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], p)
	switch n := binary.BigEndian.Uint16(b[:]); n {
	case ethPAll:
		return "all"
	case ethPIP:
		return "ip"
	case ethPIPv6:
		return "ipv6"
	default:
		return fmt.Sprintf("0x%04x", n)
	}
}

// formatClassid is tc's sprint_tc_classid.
func formatClassid(h uint32) string {
	if h == 0 {
		return "none"
	}
	return FormatHandle(h)
}

// formatU32Handle is tc's sprint_u32_handle: hash table, bucket, node.
func formatU32Handle(h uint32) string {
	if h == 0 {
		return "none"
	}
	htid, hash, node := h&0xfff00000, (h>>12)&0xff, h&0xfff
	s := ""
	if htid != 0 {
		s = fmt.Sprintf("%x:", htid>>20)
	}
	if hash != 0 {
		s += fmt.Sprintf("%x", hash)
	}
	if node != 0 {
		s += fmt.Sprintf(":%x", node)
	}
	return s
}
