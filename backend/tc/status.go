// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/shape"
)

// Info implements backend.Backend. htb and cake add each packet's overhead
// and mpu themselves, so the tc backend takes wire rates.
func (b *Backend) Info() backend.Info {
	return backend.Info{
		Name: "tc",
		Scope: fmt.Sprintf("tc: root qdiscs %s, ingress filters at prefs %d-%d, IFB devices %s*",
			FormatHandle(RootHandle), ExemptIPv4Pref, RedirectPref, IFBPrefix),
		System:         "tc",
		SharedGroup:    "tc",
		MaxSlots:       MaxSlot + 1,
		KernelOverhead: true,
		Limits:         Limits,
	}
}

// LiveSlots implements backend.SlotReader from the ingress redirects:
// macake's redirect on IF to ifb-macake<N> names IF's slot N. tc has no
// foreign slots: an IFB of macake's name is macake's.
func (b *Backend) LiveSlots(ctx context.Context) (backend.SlotUse, error) {
	live, err := b.Observe(ctx)
	if err != nil {
		return backend.SlotUse{}, err
	}
	slots := map[string]int{}
	for name, dev := range live.Devices {
		for _, f := range dev.IngressFilters {
			if f.Header || f.Pref != RedirectPref {
				continue
			}
			for _, a := range f.Actions {
				if n, ok := IFBSlot(a.ToDev); ok && a.Kind == "mirred" {
					slots[name] = n
				}
			}
		}
	}
	return backend.SlotUse{Interfaces: slots}, nil
}

// ShaperName implements backend.ShaperReader: the device that carries
// macake's root qdisc, "wan0" for upload and "ifb-macake0" for download.
func (b *Backend) ShaperName(l shape.Link, d shape.Direction) string {
	if d == shape.Download {
		return shaperName(IFBName(l.Slot))
	}
	return shaperName(l.Interface)
}

// shaperName names the shaper on a device: macake's root qdisc there.
func shaperName(dev string) string { return "qdisc " + FormatHandle(RootHandle) + " on " + dev }

// LiveShapers implements backend.ShaperReader: macake's root qdiscs as
// they are live, upload on an interface, download on an IFB (attributed to
// the interface whose redirect feeds it), with the rate of the htb class
// or of the CAKE leaf and the bfifo's limit (0 for CAKE, which sizes its
// own queue).
func (b *Backend) LiveShapers(ctx context.Context) ([]backend.LiveShaper, error) {
	live, err := b.Observe(ctx)
	if err != nil {
		return nil, err
	}
	feeds := map[string]string{} // IFB → the interface redirected to it
	for name, dev := range live.Devices {
		for _, f := range dev.IngressFilters {
			for _, a := range f.Actions {
				if _, ok := IFBSlot(a.ToDev); ok && f.Pref == RedirectPref {
					feeds[a.ToDev] = name
				}
			}
		}
	}
	var out []backend.LiveShaper
	for name, dev := range live.Devices {
		root := dev.Root()
		if root == nil || root.Handle != RootHandle {
			continue
		}
		s := backend.LiveShaper{Name: shaperName(name), Interface: name, Direction: shape.Upload.String()}
		if _, ifb := IFBSlot(name); ifb && dev.Kind == "ifb" {
			s.Interface, s.Direction = feeds[name], shape.Download.String()
		}
		switch {
		case dev.cakeLeaf() != nil && dev.cakeLeaf().Cake != nil:
			s.RateBits = int64(dev.cakeLeaf().Cake.BandwidthBytes) * 8
		case root.Kind == "htb":
			if c := dev.Class(ClassHandle); c != nil {
				s.RateBits = c.RateBits
			}
			if leaf := dev.Leaf(ClassHandle); leaf != nil && leaf.Kind == "bfifo" {
				s.QueueBytes = leaf.Limit
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// qdiscStats lists every qdisc with its counters: over netlink when the
// Backend has it, else with `tc -s -j qdisc show`.
func (b *Backend) qdiscStats(ctx context.Context) ([]Qdisc, error) {
	if b.Netlink != nil {
		live, err := b.Netlink.observe(ctx, b.Tools, true)
		if err != nil {
			return nil, err
		}
		var qs []Qdisc
		for _, d := range live.Devices {
			qs = append(qs, d.Qdiscs...)
		}
		return qs, nil
	}
	out, err := runOutput(ctx, b.Runner, b.Tools.tcCmd("-s", "-j", "qdisc", "show"))
	if err != nil {
		return nil, err
	}
	return ParseQdiscs(out)
}

// ShaperStats implements backend.StatsReader with one reading of the
// qdiscs' counters (qdiscStats), named as ShaperName names them: for htb
// those of macake's root (which include its leaf's drops and backlog),
// for CAKE those of the CAKE leaf (prio counts no overlimits, and its
// totals include the probes that bypass CAKE).
func (b *Backend) ShaperStats(ctx context.Context) ([]backend.ShaperStats, error) {
	qs, err := b.qdiscStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("tc: %w", err)
	}
	devs := map[string]*DeviceState{}
	for _, q := range qs {
		if q.Dev == "" {
			continue
		}
		if devs[q.Dev] == nil {
			devs[q.Dev] = &DeviceState{Device: Device{Name: q.Dev}}
		}
		devs[q.Dev].Qdiscs = append(devs[q.Dev].Qdiscs, q)
	}
	var stats []backend.ShaperStats
	for name, dev := range devs {
		if !dev.ownsRoot() {
			continue
		}
		q := dev.Root()
		if leaf := dev.cakeLeaf(); leaf != nil {
			q = leaf
		}
		s := q.Stats
		if s == nil {
			continue
		}
		stats = append(stats, backend.ShaperStats{Name: shaperName(name), Bytes: s.Bytes, Packets: s.Packets,
			Drops: s.Drops, BacklogBytes: s.Backlog, BacklogPackets: s.Qlen, Overlimits: s.Overlimits, Tins: tinStats(q)})
	}
	sort.Slice(stats, func(i, j int) bool { return stats[i].Name < stats[j].Name })
	return stats, nil
}

// cakeTinNames are the names of CAKE's tins by diffserv mode, in the
// order tc prints them (lowest priority first), as labels: tc's own words
// where it has them ("Best Effort" for diffserv3's and diffserv4's second
// tin), else the tin's number.
var cakeTinNames = map[string][]string{
	"diffserv3":  {"bulk", "best_effort", "voice"},
	"diffserv4":  {"bulk", "best_effort", "video", "voice"},
	"besteffort": {"best_effort"},
}

// tinStats converts a cake qdisc's tins for status and the metrics; nil
// for a qdisc without them.
func tinStats(q *Qdisc) []backend.TinStats {
	if q.Stats == nil || len(q.Stats.Tins) == 0 {
		return nil
	}
	var names []string
	if q.Cake != nil {
		names = cakeTinNames[q.Cake.Diffserv]
	}
	if len(names) != len(q.Stats.Tins) {
		names = nil
	}
	us := func(v uint64) time.Duration { return time.Duration(v) * time.Microsecond }
	out := make([]backend.TinStats, len(q.Stats.Tins))
	for i, t := range q.Stats.Tins {
		name := fmt.Sprintf("tin%d", i)
		if names != nil {
			name = names[i]
		}
		out[i] = backend.TinStats{Name: name, ThresholdBits: t.ThresholdRate * 8, Bytes: t.SentBytes, Packets: t.SentPackets,
			Drops: t.Drops, ECNMarks: t.ECNMarks, ACKDrops: t.ACKDrops, BacklogBytes: t.BacklogBytes,
			PeakDelay: us(t.PeakDelayUs), AvgDelay: us(t.AvgDelayUs), BaseDelay: us(t.BaseDelayUs),
			SparseFlows: t.SparseFlows, BulkFlows: t.BulkFlows, UnresponsiveFlows: t.Unresponsive}
	}
	return out
}

var (
	_ backend.StatsReader  = (*Backend)(nil)
	_ backend.Backend      = (*Backend)(nil)
	_ backend.SlotReader   = (*Backend)(nil)
	_ backend.ShaperReader = (*Backend)(nil)
)
