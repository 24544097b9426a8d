// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/shape"
)

// Info implements backend.Backend.
func (b *Backend) Info() backend.Info {
	return backend.Info{
		Name:        "pf",
		Scope:       fmt.Sprintf("pf anchor %q, dummynet pipes %s", b.opts.Anchor, b.opts.Pipes),
		System:      "pf/dummynet",
		SharedGroup: "pf",
		MaxSlots:    b.opts.Pipes.Slots(),
		Limits:      Limits,
	}
}

// LiveSlots implements backend.SlotReader from the anchor's rules:
// `dummynet out on IF … pipe N` with N in the range names IF's slot. A
// pipe in the range that no rule in the anchor names makes its slot
// foreign.
func (b *Backend) LiveSlots(ctx context.Context) (backend.SlotUse, error) {
	live, err := b.Observe(ctx)
	if err != nil {
		return backend.SlotUse{}, err
	}
	r := b.opts.Pipes
	use := backend.SlotUse{Interfaces: map[string]int{}, Foreign: map[int]bool{}}
	named := map[int]bool{}
	if live.Anchor.Exists {
		for _, rule := range live.Anchor.Rules {
			if rule.Pipe != 0 {
				named[rule.Pipe] = true
			}
			if slot, ok := r.Slot(rule.Pipe); ok && rule.Action == "dummynet" && rule.Interface != "" {
				use.Interfaces[rule.Interface] = slot
			}
		}
	}
	for _, p := range live.Dummynet.Pipes {
		if slot, ok := r.Slot(p.Number); ok && !named[p.Number] {
			use.Foreign[slot] = true
		}
	}
	return use, nil
}

// LiveShapers implements backend.ShaperReader: the pipes in macake's range
// with the interface and direction of the anchor rule that names each.
func (b *Backend) LiveShapers(ctx context.Context) ([]backend.LiveShaper, error) {
	live, err := b.Observe(ctx)
	if err != nil {
		return nil, err
	}
	rules := map[int]Rule{}
	for _, rule := range live.Anchor.Rules {
		if rule.Action == "dummynet" && rule.Pipe != 0 {
			rules[rule.Pipe] = rule
		}
	}
	var out []backend.LiveShaper
	for _, p := range live.Dummynet.Pipes {
		if !b.opts.Pipes.Contains(p.Number) {
			continue
		}
		s := backend.LiveShaper{Name: "pipe " + strconv.Itoa(p.Number), RateBits: p.Config.BandwidthBits, QueueBytes: p.Config.QueueBytes}
		if rule, ok := rules[p.Number]; ok {
			s.Interface = rule.Interface
			switch rule.Direction {
			case "out":
				s.Direction = shape.Upload.String()
			case "in":
				s.Direction = shape.Download.String()
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ShaperStats implements backend.StatsReader with one `dnctl list`: the
// pipes in macake's range, each with its flow rows' counters added up
// (Tot_pkt/bytes, the queued Pkt/Byte, Drp). dummynet counts no
// overlimits. Flow rows the listing garbles (reference §8.11) are left
// out rather than failing the read.
func (b *Backend) ShaperStats(ctx context.Context) ([]backend.ShaperStats, error) {
	res, err := b.read(ctx, b.opts.Dnctl, "list")
	if err != nil {
		return nil, err
	}
	dn, err := ParseDummynet(res.Stdout)
	if err != nil {
		return nil, fmt.Errorf("reading dummynet pipes: %w", err)
	}
	var out []backend.ShaperStats
	for _, p := range dn.Pipes {
		if !b.opts.Pipes.Contains(p.Number) {
			continue
		}
		c := p.Counters
		out = append(out, backend.ShaperStats{Name: "pipe " + strconv.Itoa(p.Number), Bytes: c.TotBytes, Packets: c.TotPackets,
			Drops: c.Drops, BacklogBytes: c.Bytes, BacklogPackets: c.Packets})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ShaperName implements backend.ShaperReader: "pipe 48001".
func (b *Backend) ShaperName(l shape.Link, d shape.Direction) string {
	n, err := b.opts.Pipes.Pipe(l.Slot, d)
	if err != nil {
		return ""
	}
	return "pipe " + strconv.Itoa(n)
}

var (
	_ backend.Backend      = (*Backend)(nil)
	_ backend.SlotReader   = (*Backend)(nil)
	_ backend.ShaperReader = (*Backend)(nil)
	_ backend.BlindPlanner = (*Backend)(nil)
	_ backend.StatsReader  = (*Backend)(nil)
)
