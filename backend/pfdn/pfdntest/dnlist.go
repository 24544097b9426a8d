// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"bytes"
	"fmt"
)

// writeListing prints `dnctl list` with dnctl.c's exact printf formats
// (reference §1.7): pipes in hash order, then every queue; only names the
// one pipe to show (0 = all), and never filters the queues.
func writeListing(w *bytes.Buffer, m *Machine, only uint32, verbose bool) {
	for _, p := range m.listedPipes() {
		if only != 0 && only != uint32(p.Number) {
			continue
		}
		fmt.Fprintf(w, "%s\n", pipeLine(p))
		if verbose {
			fmt.Fprintf(w, "   V %20d\n", 0)
		}
		writeFlows(w, &p.FS, verbose)
	}
	for _, q := range m.listedQueues() {
		prefix := fmt.Sprintf("q%05d: weight %d pipe %d ", q.Number, q.Weight, q.Parent)
		fmt.Fprintf(w, "%s\n", flowsetLine(prefix, &q.FS))
		writeFlows(w, &q.FS, verbose)
	}
}

// pipeLine is the pipe's line, without the trailing newline (a RED pipe's
// "line" contains one).
func pipeLine(p *Pipe) string {
	b := float64(p.Bandwidth)
	var rate string
	switch {
	case p.IfName != "":
		rate = p.IfName
	case b == 0:
		rate = "unlimited"
	case b >= 1000000:
		rate = fmt.Sprintf("%7.3f Mbit/s", b/1000000)
	case b >= 1000:
		rate = fmt.Sprintf("%7.3f Kbit/s", b/1000)
	default:
		rate = fmt.Sprintf("%7.3f bit/s ", b)
	}
	return flowsetLine(fmt.Sprintf("%05d: %s %4d ms ", p.Number, rate, p.Delay), &p.FS)
}

// flowsetLine is print_flowset_parms.
func flowsetLine(prefix string, fs *FlowSet) string {
	var qs string
	l := fs.QSize
	switch {
	case fs.Bytes && l >= 8192:
		qs = fmt.Sprintf("%d KB", l/1024)
	case fs.Bytes:
		qs = fmt.Sprintf("%d B", l)
	default:
		qs = fmt.Sprintf("%3d sl.", l)
	}
	plr := ""
	if fs.PLR != 0 {
		plr = fmt.Sprintf("plr %f", float64(fs.PLR)/float64(0x7fffffff))
	}
	red := "droptail"
	if fs.RED {
		g := ' '
		if fs.Gentle {
			g = 'G'
		}
		red = fmt.Sprintf("\n\t  %cRED w_q %f min_th %d max_th %d max_p %f", g,
			float64(fs.WQ)/65536, fs.MinTh, fs.MaxTh, float64(fs.MaxP)/65536)
	}
	return fmt.Sprintf("%s %s%s %d queues (%d buckets) %s", prefix, qs, plr, len(fs.Flows), fs.RqSize, red)
}

// writeFlows is list_queues: the mask line always, and when there are
// flows the mask and header again before the IPv4 rows, then the IPv6
// section.
func writeFlows(w *bytes.Buffer, fs *FlowSet, verbose bool) {
	mk := fs.Mask
	fmt.Fprintf(w, "    mask: 0x%02x 0x%08x/0x%04x -> 0x%08x/0x%04x\n", mk.Proto, mk.SrcIP, mk.SrcPort, mk.DstIP, mk.DstPort)
	if len(fs.Flows) == 0 {
		return
	}
	const header4 = "BKT Prot ___Source IP/port____ ____Dest. IP/port____ Tot_pkt/bytes Pkt/Byte Drp\n"
	w.WriteString(header4)
	indexes := 0
	printed := false
	for _, f := range fs.Flows {
		if f.Src.Is6() {
			continue
		}
		if !printed {
			printed = true
			if indexes > 0 {
				w.WriteString("\n")
			}
			indexes++
			fmt.Fprintf(w, "    mask: 0x%02x 0x%08x/0x%04x -> 0x%08x/0x%04x\n", mk.Proto, mk.SrcIP, mk.SrcPort, mk.DstIP, mk.DstPort)
			w.WriteString(header4)
		}
		fmt.Fprintf(w, "%3d ", f.Slot)
		if name, ok := protocolNumbers[int(f.Proto)]; ok {
			fmt.Fprintf(w, "%-4s ", name)
		} else {
			fmt.Fprintf(w, "%4d ", f.Proto)
		}
		fmt.Fprintf(w, "%15s/%-5d ", f.Src, f.SrcPort)
		fmt.Fprintf(w, "%15s/%-5d ", f.Dst, f.DstPort)
		fmt.Fprintf(w, "%4d %8d %2d %4d %3d\n", f.TotPkts, f.TotBytes, f.Len, f.LenBytes, f.Drops)
		if verbose {
			fmt.Fprintf(w, "   S %20d  F %20d\n", 0, 0)
		}
	}
	printed = false
	for _, f := range fs.Flows {
		if !f.Src.Is6() {
			continue
		}
		if !printed {
			printed = true
			if indexes > 0 {
				w.WriteString("\n")
			}
			indexes++
			fmt.Fprintf(w, "\n        mask: proto: 0x%02x, flow_id: 0x%08x,  ", mk.Proto, mk.FlowID6)
			fmt.Fprintf(w, "%s/0x%04x -> ", ipv6Mask(mk.SrcIP6Bits), mk.SrcPort)
			fmt.Fprintf(w, "%s/0x%04x\n", ipv6Mask(mk.DstIP6Bits), mk.DstPort)
			w.WriteString("BKT ___Prot___ _flow-id_ ______________Source IPv6/port_______________ _______________Dest. IPv6/port_______________ Tot_pkt/bytes Pkt/Byte Drp\n")
		}
		fmt.Fprintf(w, "%3d ", f.Slot)
		if name, ok := protocolNumbers[int(f.Proto)]; ok {
			fmt.Fprintf(w, "%9s ", name)
		} else {
			fmt.Fprintf(w, "%9d ", f.Proto)
		}
		fmt.Fprintf(w, "%7d  %39s/%-5d ", 0, f.Src, f.SrcPort)
		fmt.Fprintf(w, " %39s/%-5d ", f.Dst, f.DstPort)
		fmt.Fprintf(w, " %4d %8d %2d %4d %3d\n", f.TotPkts, f.TotBytes, f.Len, f.LenBytes, f.Drops)
		if verbose {
			fmt.Fprintf(w, "   S %20d  F %20d\n", 0, 0)
		}
	}
}
