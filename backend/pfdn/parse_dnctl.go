// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/macake/macake/internal/lazyregexp"
)

// LivePipe is one pipe listed by `dnctl list`.
type LivePipe struct {
	Number int
	Config PipeConfig
	// Flows is the number of flow queues ("N queues"), Buckets the hash
	// size ("(N buckets)").
	Flows, Buckets int
	// Counters add up the pipe's readable flow rows.
	Counters FlowCounters
}

// FlowCounters are the counters of a pipe's flow rows (list_queues's
// "Tot_pkt/bytes Pkt/Byte Drp"), summed over its flows: a pipe without a
// mask has one flow, created by its first packet.
type FlowCounters struct {
	// TotPackets and TotBytes count every packet that reached the pipe,
	// dropped ones included (dummynet counts before its queue check).
	TotPackets, TotBytes uint64
	// Packets and Bytes are queued now.
	Packets, Bytes uint64
	// Drops are the packets dropped for a full queue (or plr).
	Drops uint64
}

// LiveQueue is one dummynet queue (flow set) listed by `dnctl list`.
// macake never creates them; they are read to warn about them.
type LiveQueue struct {
	Number, Weight, Parent int
	Config                 PipeConfig
	Flows, Buckets         int
}

// Dummynet is the parsed output of `dnctl list`.
type Dummynet struct {
	// Pipes and Queues are in listing order (hash order, not sorted).
	Pipes  []LivePipe
	Queues []LiveQueue
	// Warnings are lines that could not be read inside a flow table; the
	// reference (§8.11) warns that flow rows may be garbled on current
	// kernels, so they never stop a plan.
	Warnings []string
}

// Pipe returns the listed pipe n.
func (d Dummynet) Pipe(n int) (LivePipe, bool) {
	for _, p := range d.Pipes {
		if p.Number == n {
			return p, true
		}
	}
	return LivePipe{}, false
}

// The line shapes of `dnctl list` (reference §1.7; dnctl.c list_pipes,
// print_flowset_parms and list_queues).
var (
	// prefix "%05d: %s %4d ms " + " %s%s %d queues (%d buckets) %s"
	dnPipeLine = lazyregexp.New(`^(\d+): +(.+?) +(-?\d+) ms +(-?\d+) (sl\.|KB|B)(?:plr (\d+\.\d+))? (-?\d+) queues \((-?\d+) buckets\) (droptail)?$`)
	// prefix "q%05d: weight %d pipe %d " + the same tail
	dnQueueLine = lazyregexp.New(`^q(\d+): weight (-?\d+) pipe (-?\d+) +(-?\d+) (sl\.|KB|B)(?:plr (\d+\.\d+))? (-?\d+) queues \((-?\d+) buckets\) (droptail)?$`)
	dnRED       = lazyregexp.New(`^\t  ([ G])RED w_q (\S+) min_th (-?\d+) max_th (-?\d+) max_p (\S+)$`)
	dnMask      = lazyregexp.New(`^    mask: 0x([0-9a-f]{2}) 0x([0-9a-f]{8})/0x([0-9a-f]{4}) -> 0x([0-9a-f]{8})/0x([0-9a-f]{4})$`)
	dnMask6     = lazyregexp.New(`^        mask: proto: 0x[0-9a-f]{2}, flow_id: 0x[0-9a-f]{8},  \S+/0x[0-9a-f]{4} -> \S+/0x[0-9a-f]{4}$`)
	// flow rows: "%3d %-4s %15s/%-5d %15s/%-5d %4llu %8llu %2u %4u %3u"
	// (IPv6: proto, flow id, addresses, the same five counters).
	dnFlow4  = lazyregexp.New(`^ *\d+ +\S+ +\S+/\d+ +\S+/\d+ +(\d+) +(\d+) +(\d+) +(\d+) +(\d+)$`)
	dnFlow6  = lazyregexp.New(`^ *\d+ +\S+ +-?\d+ +\S+/\d+ +\S+/\d+ +(\d+) +(\d+) +(\d+) +(\d+) +(\d+)$`)
	dnSF     = lazyregexp.New(`^   S +\d+  F +\d+$`)
	dnV      = lazyregexp.New(`^   V +-?\d+$`)
	dnRate   = lazyregexp.New(`^(\d+)\.(\d{3}) (Mbit/s|Kbit/s|bit/s)$`)
	dnIfName = lazyregexp.New(`^[a-z][A-Za-z0-9._-]*$`)
)

const (
	dnHeader4 = "BKT Prot ___Source IP/port____ ____Dest. IP/port____ Tot_pkt/bytes Pkt/Byte Drp"
	dnHeader6 = "BKT ___Prot___ _flow-id_ ______________Source IPv6/port_______________ _______________Dest. IPv6/port_______________ Tot_pkt/bytes Pkt/Byte Drp"
)

// ParseDummynet parses `dnctl list` (identical to `show` and `-a list`).
// Pipe and queue lines must parse exactly, and a line outside a flow table
// that is not a known shape is an error. Inside a flow table (after a BKT
// header) unreadable lines are warnings: flow rows are informational and may
// be garbled on real Macs.
func ParseDummynet(stdout []byte) (Dummynet, error) {
	var d Dummynet
	seenPipe := map[int]bool{}
	seenQueue := map[int]bool{}
	inFlows := false // inside a flow table, after a BKT header
	wantRED := false // the previous pipe/queue line ended where RED goes
	var cfg *PipeConfig
	// counts is where the current object's flow rows add up (nil for a
	// queue: macake reads only its pipes' counters).
	var counts *FlowCounters
	for i, line := range splitLines(stdout) {
		n := i + 1
		if wantRED {
			m := dnRED.FindStringSubmatch(line)
			if m == nil {
				return Dummynet{}, fmt.Errorf("dnctl list output, line %d: expected a RED line, got %q", n, line)
			}
			wantRED = false
			kind := "RED"
			if m[1] == "G" {
				kind = "GRED"
			}
			cfg.RED = fmt.Sprintf("%s w_q %s min_th %s max_th %s max_p %s", kind, m[2], m[3], m[4], m[5])
			continue
		}
		if m := dnPipeLine.FindStringSubmatch(line); m != nil {
			p, err := parsePipeLine(m)
			if err != nil {
				return Dummynet{}, fmt.Errorf("dnctl list output, line %d: %w", n, err)
			}
			if seenPipe[p.Number] {
				return Dummynet{}, fmt.Errorf("dnctl list output, line %d: pipe %d listed twice", n, p.Number)
			}
			seenPipe[p.Number] = true
			d.Pipes = append(d.Pipes, p)
			cfg = &d.Pipes[len(d.Pipes)-1].Config
			counts = &d.Pipes[len(d.Pipes)-1].Counters
			wantRED = m[9] == ""
			inFlows = false
			continue
		}
		if m := dnQueueLine.FindStringSubmatch(line); m != nil {
			q, err := parseQueueLine(m)
			if err != nil {
				return Dummynet{}, fmt.Errorf("dnctl list output, line %d: %w", n, err)
			}
			if seenQueue[q.Number] {
				return Dummynet{}, fmt.Errorf("dnctl list output, line %d: queue %d listed twice", n, q.Number)
			}
			seenQueue[q.Number] = true
			d.Queues = append(d.Queues, q)
			cfg = &d.Queues[len(d.Queues)-1].Config
			counts = nil
			wantRED = m[9] == ""
			inFlows = false
			continue
		}
		switch {
		case dnMask.MatchString(line):
			if cfg == nil {
				return Dummynet{}, fmt.Errorf("dnctl list output, line %d: a mask line before any pipe", n)
			}
			if mask := maskString(dnMask.FindStringSubmatch(line)); mask != "" {
				cfg.Mask = mask
			}
		case line == dnHeader4, line == dnHeader6:
			if cfg == nil {
				return Dummynet{}, fmt.Errorf("dnctl list output, line %d: a flow header before any pipe", n)
			}
			inFlows = true
		case strings.TrimSpace(line) == "", dnV.MatchString(line):
		case inFlows && (dnFlow4.MatchString(line) || dnFlow6.MatchString(line)):
			m := dnFlow4.FindStringSubmatch(line)
			if m == nil {
				m = dnFlow6.FindStringSubmatch(line)
			}
			if err := addFlow(counts, m[1:]); err != nil {
				d.Warnings = append(d.Warnings, fmt.Sprintf("dnctl list output, line %d: flow counters %q: %v (ignored)", n, line, err))
			}
		case inFlows && (dnSF.MatchString(line) || dnMask6.MatchString(line)):
		case inFlows:
			d.Warnings = append(d.Warnings, fmt.Sprintf("dnctl list output, line %d: unreadable flow line %q (ignored; flow rows can be garbled on current macOS)", n, line))
		default:
			return Dummynet{}, fmt.Errorf("dnctl list output, line %d: unrecognised line %q", n, line)
		}
	}
	if wantRED {
		return Dummynet{}, fmt.Errorf("dnctl list output ends where a RED line was expected")
	}
	return d, nil
}

// addFlow adds one flow row's five counters to c (nil: not counted).
func addFlow(c *FlowCounters, fields []string) error {
	var v [5]uint64
	for i, f := range fields {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return err
		}
		v[i] = n
	}
	if c != nil {
		c.TotPackets += v[0]
		c.TotBytes += v[1]
		c.Packets += v[2]
		c.Bytes += v[3]
		c.Drops += v[4]
	}
	return nil
}

func parsePipeLine(m []string) (LivePipe, error) {
	num, err := strconv.Atoi(m[1])
	if err != nil {
		return LivePipe{}, fmt.Errorf("pipe number %q: %w", m[1], err)
	}
	p := LivePipe{Number: num}
	if err := parseRate(m[2], &p.Config); err != nil {
		return LivePipe{}, fmt.Errorf("pipe %d: %w", num, err)
	}
	if p.Config.DelayMS, err = strconv.ParseInt(m[3], 10, 64); err != nil {
		return LivePipe{}, fmt.Errorf("pipe %d delay %q: %w", num, m[3], err)
	}
	if err := parseQueue(m[4], m[5], &p.Config); err != nil {
		return LivePipe{}, fmt.Errorf("pipe %d: %w", num, err)
	}
	p.Config.PLR = m[6]
	p.Flows, _ = strconv.Atoi(m[7])
	p.Buckets, _ = strconv.Atoi(m[8])
	return p, nil
}

func parseQueueLine(m []string) (LiveQueue, error) {
	num, err := strconv.Atoi(m[1])
	if err != nil {
		return LiveQueue{}, fmt.Errorf("queue number %q: %w", m[1], err)
	}
	q := LiveQueue{Number: num}
	q.Weight, _ = strconv.Atoi(m[2])
	q.Parent, _ = strconv.Atoi(m[3])
	if err := parseQueue(m[4], m[5], &q.Config); err != nil {
		return LiveQueue{}, fmt.Errorf("queue %d: %w", num, err)
	}
	q.Config.PLR = m[6]
	q.Flows, _ = strconv.Atoi(m[7])
	q.Buckets, _ = strconv.Atoi(m[8])
	return q, nil
}

// parseRate reads the rate column: "unlimited", "%7.3f Mbit/s",
// "%7.3f Kbit/s", "%7.3f bit/s" or the name of a clocking interface. The
// decimals are read as fixed point, never through a float, so a whole
// Kbit/s rate round-trips exactly.
func parseRate(s string, c *PipeConfig) error {
	if s == "unlimited" {
		return nil
	}
	if m := dnRate.FindStringSubmatch(s); m != nil {
		whole, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || whole > 1<<40 {
			return fmt.Errorf("rate %q out of range", s)
		}
		frac, _ := strconv.ParseInt(m[2], 10, 64)
		switch m[3] {
		case "Mbit/s":
			c.BandwidthBits = whole*1_000_000 + frac*1000
		case "Kbit/s":
			c.BandwidthBits = whole*1000 + frac
		default:
			c.BandwidthBits = whole
		}
		return nil
	}
	if dnIfName.MatchString(s) {
		c.ClockInterface = s
		return nil
	}
	return fmt.Errorf("unrecognised rate %q", s)
}

func parseQueue(num, unit string, c *PipeConfig) error {
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return fmt.Errorf("queue size %q: %w", num, err)
	}
	switch unit {
	case "sl.":
		c.QueueSlots = v
	case "KB":
		c.QueueBytes = v * 1024
	default:
		c.QueueBytes = v
	}
	return nil
}

// maskString returns the mask line's fields, or "" when every field is 0.
func maskString(m []string) string {
	zero := true
	for _, f := range m[1:] {
		if strings.Trim(f, "0") != "" {
			zero = false
		}
	}
	if zero {
		return ""
	}
	return fmt.Sprintf("proto 0x%s src 0x%s/0x%s dst 0x%s/0x%s", m[1], m[2], m[3], m[4], m[5])
}
