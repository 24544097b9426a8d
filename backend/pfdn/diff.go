// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// The plan.Op kinds this backend emits.
const (
	KindPipe = "pipe"
	// KindRules is the anchor's rules, always loaded whole by one op.
	KindRules       = "rules"
	KindPFReference = "pf-reference"
)

// pipeAttributes is how many attributes a pipe has in a plan: bandwidth,
// queue, delay, packet loss, flow mask and drop policy.
const pipeAttributes = 6

// Diff computes the ordered operations that make live match d. It is pure:
// it runs nothing and reads nothing but its arguments. heldToken is the pf
// enable token macake holds ("" for none).
//
// The order is safe at every step: pipes are created or updated before the
// anchor that names them is loaded, the anchor is reloaded (or flushed)
// before the pipes it no longer names are deleted, and the pf enable
// reference is taken last (so shaping starts whole) and released last.
// Only owned objects appear: the anchor, pipes inside the range, macake's
// own token. Anything else that matters produces a warning, never an op.
func Diff(d Desired, live Live, heldToken string) plan.Plan {
	o := d.Options
	p := plan.Plan{Ops: []plan.Op{}, Warnings: []plan.Warning{}}
	for _, w := range d.Warnings {
		p.Warnings = append(p.Warnings, plan.Warning{Link: w.Link, Message: w.Message})
	}
	for _, ws := range [][]string{live.Main.Warnings, live.Anchor.Warnings, live.Info.Warnings, live.ReferenceWarnings, live.Dummynet.Warnings} {
		for _, w := range ws {
			p.Warnings = append(p.Warnings, plan.Warning{Message: w})
		}
	}
	p.Warnings = append(p.Warnings, mainRulesetWarnings(live, o.Anchor)...)

	livePipes := make(map[int]LivePipe, len(live.Dummynet.Pipes))
	for _, lp := range live.Dummynet.Pipes {
		livePipes[lp.Number] = lp
	}
	queuesOn := map[int][]int{}
	for _, q := range live.Dummynet.Queues {
		queuesOn[q.Parent] = append(queuesOn[q.Parent], q.Number)
		if o.Pipes.Contains(q.Parent) {
			p.Warnings = append(p.Warnings, plan.Warning{Message: fmt.Sprintf(
				"dummynet queue %d is attached to pipe %d inside macake's range %s; macake never creates queues (flow sets can panic macOS) and leaves it alone", q.Number, q.Parent, o.Pipes)})
		}
	}

	// Ownership comes from evidence only: a pipe is macake's when the state
	// file assigns its slot (d.KnownLinks) or a rule in macake's anchor
	// names it. Settings prove nothing: another tool may configure a pipe
	// exactly as macake would.
	ruleIface := map[int]Rule{}
	for _, r := range live.Anchor.Rules {
		if r.Pipe != 0 {
			ruleIface[r.Pipe] = r
		}
	}
	owned := func(n int) bool {
		_, named := ruleIface[n]
		return named || d.knownPipe(n)
	}

	// A desired link whose pipe number holds a pipe macake cannot prove
	// is its own is left out whole: updating the pipe would overwrite
	// another tool's, and a rule naming it would send traffic into it.
	// (Desired never allocates such a slot; this guards every other way a
	// link can get one.)
	blocked := map[int]bool{}
	var links []DesiredLink
	for _, l := range d.Links {
		var foreign []LivePipe
		for _, dp := range l.Pipes {
			if dp.Number == 0 {
				continue // a direction the link does not shape
			}
			if lp, exists := livePipes[dp.Number]; exists && !owned(dp.Number) {
				foreign = append(foreign, lp)
			}
		}
		if len(foreign) == 0 {
			links = append(links, l)
			continue
		}
		for _, lp := range foreign {
			blocked[lp.Number] = true
			p.Warnings = append(p.Warnings, plan.Warning{Link: l.Name, Message: notOwnedPipe(lp, queuesOn, o,
				fmt.Sprintf(" and does not shape %s while it is there", l.Name))})
		}
	}
	d.Links = links

	// 1. Pipes to create or update.
	desiredPipes := map[int]bool{}
	for _, l := range d.Links {
		for _, dp := range l.Pipes {
			if dp.Number == 0 {
				continue
			}
			desiredPipes[dp.Number] = true
			want := dp.Config()
			lp, exists := livePipes[dp.Number]
			var fields []plan.Field
			if exists {
				if fields = comparePipe(lp.Config, want); len(fields) == 0 {
					continue
				}
			}
			note := dp.Pipe.Compensation.String()
			op := plan.Op{
				Link: l.Name, Interface: l.Interface, Kind: KindPipe,
				ID: strconv.Itoa(dp.Number), Label: pipeLabel(dp.Number, l.Name, dp.Direction),
				Commands: []execrun.Command{PipeCommand(o.Dnctl, dp.Number, dp.Pipe)},
			}
			if !exists {
				op.Action = plan.Create
				op.Reason = "not present"
				op.Fields = []plan.Field{
					rateField(PipeConfig{}, want, false),
					queueField(PipeConfig{}, want, false),
				}
				op.Fields[0].Note = note
				p.Ops = append(p.Ops, op)
				continue
			}
			op.Action = plan.Update
			for i := range fields {
				if fields[i].Key == rateKey {
					fields[i].Note = note
				}
			}
			op.Fields = fields
			op.Unchanged = pipeAttributes - len(fields)
			op.Reason = differReason(fields)
			p.Ops = append(p.Ops, op)
		}
	}

	// 2. The anchor, always loaded whole.
	if op, ok := anchorOp(d, live); ok {
		p.Ops = append(p.Ops, op)
	}

	// 3. Pipes to delete: owned pipes no desired link uses. The others in
	// the range are left alone, with a warning that says how to remove one
	// that is a leftover of macake's.
	var stale []LivePipe
	for _, lp := range live.Dummynet.Pipes {
		if !o.Pipes.Contains(lp.Number) || desiredPipes[lp.Number] || blocked[lp.Number] {
			continue
		}
		if !owned(lp.Number) {
			p.Warnings = append(p.Warnings, plan.Warning{Message: notOwnedPipe(lp, queuesOn, o, "")})
			continue
		}
		stale = append(stale, lp)
	}
	sort.Slice(stale, func(i, j int) bool { return stale[i].Number < stale[j].Number })
	for _, lp := range stale {
		label := "pipe " + strconv.Itoa(lp.Number)
		iface, reason := "", "no configured link uses it"
		r, named := ruleIface[lp.Number]
		if named {
			iface = r.Interface
		}
		link, known := d.linkOfPipe(lp.Number)
		if l, dir, off := d.unshapedDirection(lp.Number); off {
			// The link stays, but no longer shapes this direction.
			link, iface, label = l.Name, l.Interface, pipeLabel(lp.Number, l.Name, dir)
			reason = shape.DirectionOff(dir)
		}
		switch {
		case link != "" && !known:
		case known:
			dir, _ := o.Pipes.Direction(lp.Number) // known: the pipe is in a slot
			label = pipeLabel(lp.Number, link, dir)
			var why bool
			if reason, why = d.unshapedReason(link); !why {
				reason = noLongerDesired
				if len(d.Links) == 0 {
					reason = "nothing left to shape"
				}
			}
		case named && iface != "":
			label += fmt.Sprintf(" (%s on %s)", directionOf(r.Direction), iface)
		}
		p.Ops = append(p.Ops, plan.Op{
			Link: link, Interface: iface, Kind: KindPipe, ID: strconv.Itoa(lp.Number), Label: label,
			Action: plan.Remove, Reason: reason,
			Fields:   []plan.Field{rateField(lp.Config, PipeConfig{}, true), queueField(lp.Config, PipeConfig{}, true)},
			Commands: []execrun.Command{{Argv: []string{o.Dnctl, "pipe", "delete", strconv.Itoa(lp.Number)}}},
		})
	}

	// 4. The pf enable reference.
	held := live.HoldsToken(heldToken)
	switch {
	case len(d.Links) > 0 && !held:
		reason := "macake holds no pf enable reference"
		switch {
		case heldToken != "" && !live.Info.Enabled:
			reason = "pf was disabled (pfctl -d or a reboot), which invalidated macake's reference"
		case heldToken != "":
			reason = "macake's pf reference is no longer valid (pf was disabled or the Mac rebooted)"
		}
		before := "disabled"
		if live.Info.Enabled {
			before = "enabled by others"
		}
		p.Ops = append(p.Ops, plan.Op{
			Kind: KindPFReference, Role: plan.RoleEnable, ID: "pf", Label: "pf enable reference", Action: plan.Create, Reason: reason,
			Fields:   []plan.Field{{Name: "pf", Before: before, After: "enabled, with macake's reference", Key: "pf_enabled", BeforeValue: live.Info.Enabled, AfterValue: true}},
			Commands: []execrun.Command{{Argv: []string{o.Pfctl, "-E"}}},
		})
	case len(d.Links) == 0 && held:
		after := "enabled by others"
		if len(live.References) == 1 {
			after = "disabled, unless enabled without a reference (pfctl -e)"
		}
		p.Ops = append(p.Ops, plan.Op{
			Kind: KindPFReference, Role: plan.RoleEnable, ID: "pf", Label: "pf enable reference", Action: plan.Remove, Reason: "nothing left to shape",
			Fields:   []plan.Field{{Name: "pf", Before: "enabled, with macake's reference", After: after, Key: "pf_reference_held", BeforeValue: true, AfterValue: false}},
			Commands: []execrun.Command{{Argv: []string{o.Pfctl, "-X", heldToken}}},
		})
	}
	return p
}

// anchorOp compares the anchor's dummynet rules. The anchor is always
// loaded whole with `pfctl -a ANCHOR -f -`, which replaces every rule type
// in it; an anchor with nothing left is flushed, and pf deletes it.
func anchorOp(d Desired, live Live) (plan.Op, bool) {
	o := d.Options
	want := d.Rules()
	var have []string
	if live.Anchor.Exists {
		have = live.Anchor.Texts()
	}
	op := plan.Op{Kind: KindRules, Role: plan.RoleRules, ID: o.Anchor, Label: fmt.Sprintf("anchor %q", o.Anchor)}
	switch {
	case len(want) > 0 && slices.Equal(want, have):
		return plan.Op{}, false
	case len(want) > 0:
		op.Action = plan.Update
		op.Reason = "rules differ"
		if len(have) == 0 {
			op.Action = plan.Create
			op.Reason = "not present"
		}
		op.Commands = []execrun.Command{{Argv: []string{o.Pfctl, "-a", o.Anchor, "-f", "-"}, Stdin: d.AnchorText()}}
	case len(have) > 0:
		op.Action = plan.Remove
		op.Reason = "nothing left to shape"
		op.Commands = []execrun.Command{{Argv: []string{o.Pfctl, "-a", o.Anchor, "-F", "all"}}}
	default:
		return plan.Op{}, false
	}
	op.Fields, op.Unchanged, op.Link, op.Interface = ruleFields(d, live.Anchor.Rules, have)
	if op.Link != "" && !d.desires(op.Link) {
		// The only rules that change are those of a link that is gone:
		// say why it is gone.
		if why, ok := d.unshapedReason(op.Link); ok {
			op.Reason = why
		} else if op.Action == plan.Update {
			op.Reason = noLongerDesired
		}
	}
	return op, true
}

// ruleFields groups the anchor's rules by interface and reports the
// interfaces whose rules change. When exactly one link's rules change, the
// op belongs to that link.
func ruleFields(d Desired, liveRules []Rule, have []string) (fields []plan.Field, unchanged int, link, iface string) {
	type group struct {
		link        string
		want, have  []string
		inInterface string
	}
	groups := map[string]*group{}
	var order []string
	get := func(iface string) *group {
		g, ok := groups[iface]
		if !ok {
			g = &group{inInterface: iface}
			groups[iface] = g
			order = append(order, iface)
		}
		return g
	}
	for _, l := range d.Links {
		g := get(l.Interface)
		g.link, g.want = l.Name, l.Rules
	}
	for i, r := range liveRules {
		if i < len(have) {
			g := get(r.Interface)
			g.have = append(g.have, r.Text)
			if g.link == "" && r.Pipe != 0 {
				g.link, _ = d.linkOfPipe(r.Pipe)
			}
		}
	}
	var changed []*group
	for _, k := range order {
		g := groups[k]
		if slices.Equal(g.want, g.have) {
			unchanged++
			continue
		}
		changed = append(changed, g)
		name := "rules on " + g.inInterface
		switch {
		case g.inInterface == "":
			name = "rules without an interface"
		case g.link != "":
			name = fmt.Sprintf("rules for %s (%s)", g.link, g.inInterface)
		}
		key := "rules_on_" + g.inInterface
		if g.inInterface == "" {
			key = "rules_without_interface"
		}
		f := plan.Field{
			Name: name, Before: countRules(g.have), After: countRules(g.want),
			Key: key, BeforeValue: nilIfEmpty(g.have), AfterValue: nilIfEmpty(g.want),
		}
		if len(g.have) > 0 && len(g.want) > 0 {
			// Rules that all go or all come say it with the count.
			f.Lines = lineDiff(g.have, g.want, maxShownRuleLines)
		}
		fields = append(fields, f)
	}
	if len(changed) == 1 && changed[0].link != "" {
		link, iface = changed[0].link, changed[0].inInterface
	}
	return fields, unchanged, link, iface
}

// maxShownRuleLines caps the changed rule lines a plan shows per
// interface: enough for a link's reflector swap or pipe renumbering,
// short enough to read; the full text is in the command and in the JSON.
const maxShownRuleLines = 12

// lineDiff lists what turns have into want, in order: "- LINE" for a line
// that goes, "+ LINE" for one that comes, lines both keep left out (a
// longest common subsequence, so a moved rule shows as gone and come:
// pf's rule order matters). At most limit lines, then "… N more".
func lineDiff(have, want []string, limit int) []string {
	// lcs[i][j] is the LCS length of have[i:] and want[j:]; anchors hold
	// tens of rules, so the quadratic table is small.
	lcs := make([][]int, len(have)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(want)+1)
	}
	for i := len(have) - 1; i >= 0; i-- {
		for j := len(want) - 1; j >= 0; j-- {
			if have[i] == want[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(have) || j < len(want) {
		switch {
		case i < len(have) && j < len(want) && have[i] == want[j]:
			i, j = i+1, j+1
		case j == len(want) || i < len(have) && lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, "- "+have[i])
			i++
		default:
			out = append(out, "+ "+want[j])
			j++
		}
	}
	if len(out) > limit {
		out = append(out[:limit:limit], fmt.Sprintf("… %d more", len(out)-limit))
	}
	return out
}

func countRules(rules []string) string {
	switch len(rules) {
	case 0:
		return "none"
	case 1:
		return "1 rule"
	}
	return fmt.Sprintf("%d rules", len(rules))
}

func nilIfEmpty(s []string) any {
	if len(s) == 0 {
		return nil
	}
	return s
}

// comparePipe lists the attributes in which a live pipe differs from the
// wanted one. Everything macake leaves at its default must be at its
// default live: a config call is a full replacement, so the update puts
// those back too.
func comparePipe(have, want PipeConfig) []plan.Field {
	var f []plan.Field
	if have.ClockInterface != "" || have.BandwidthBits != want.BandwidthBits {
		f = append(f, rateField(have, want, true))
	}
	if have.QueueSlots != 0 || have.QueueBytes != want.QueueBytes {
		f = append(f, queueField(have, want, true))
	}
	if have.DelayMS != 0 {
		f = append(f, plan.Field{Name: "delay", Before: fmt.Sprintf("%d ms", have.DelayMS), After: "0 ms",
			Key: "delay_milliseconds", BeforeValue: have.DelayMS, AfterValue: int64(0)})
	}
	if have.PLR != "" {
		v, _ := strconv.ParseFloat(have.PLR, 64)
		f = append(f, plan.Field{Name: "packet loss", Before: have.PLR, After: "none",
			Key: "packet_loss_rate", BeforeValue: v, AfterValue: 0.0})
	}
	if have.Mask != "" {
		f = append(f, plan.Field{Name: "flow mask", Before: have.Mask, After: "none", Key: "flow_mask", BeforeValue: have.Mask, AfterValue: ""})
	}
	if have.RED != "" {
		f = append(f, plan.Field{Name: "drop policy", Before: have.RED, After: "droptail", Key: "drop_policy", BeforeValue: have.RED, AfterValue: "droptail"})
	}
	return f
}

// rateKey is the JSON key of a pipe's rate.
const rateKey = "bandwidth_bits_per_second"

func rateField(have, want PipeConfig, haveSet bool) plan.Field {
	f := plan.Field{Name: "bandwidth", Key: rateKey}
	if haveSet {
		f.Before = have.rateString()
		if have.ClockInterface == "" {
			f.BeforeValue = have.BandwidthBits
		}
	}
	if want != (PipeConfig{}) {
		f.After, f.AfterValue = want.rateString(), want.BandwidthBits
	}
	if haveSet && f.BeforeValue != nil && want.ClockInterface == "" && want.BandwidthBits != 0 && have.BandwidthBits != 0 {
		// Two rates that round alike get the digits that tell them apart.
		f.Before, f.After = shape.FormatRateChange(have.BandwidthBits, want.BandwidthBits)
	}
	return f
}

func queueField(have, want PipeConfig, haveSet bool) plan.Field {
	f := plan.Field{Name: "queue", Key: "queue_bytes"}
	if haveSet {
		f.Before = have.queueString()
		if have.QueueSlots == 0 {
			f.BeforeValue = have.QueueBytes
		}
	}
	if want != (PipeConfig{}) {
		f.After, f.AfterValue = want.queueString(), want.QueueBytes
	}
	return f
}

func differReason(fields []plan.Field) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	if len(names) == 1 {
		return names[0] + " differs"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " differ"
}

// notOwnedPipe says why a pipe in macake's range is left alone: neither
// the state file nor a rule in macake's anchor names it. consequence is
// spliced in after "leaves it alone", e.g. "and does not shape wan while
// it is there".
func notOwnedPipe(lp LivePipe, queuesOn map[int][]int, o Options, consequence string) string {
	what := "its settings are ones macake never writes, so it is probably another tool's"
	if looksOwned(lp, queuesOn) {
		what = "its settings are the kind macake writes, so it may be a leftover of macake's from a lost state file"
	}
	return fmt.Sprintf("pipe %d (%s) is inside macake's range %s, but neither the state file nor a rule in the anchor %q names it, so macake leaves it alone%s (%s). "+
		"If it is a leftover of macake's, remove it: sudo %s pipe delete %d; if another tool uses it, give macake another pipe_range in the daemon settings",
		lp.Number, lp.Config, o.Pipes, o.Anchor, consequence, what, filepath.Base(o.Dnctl), lp.Number)
}

// LooksOwned reports whether a pipe config has the shape macake gives its
// pipes: whole Kbit/s, a whole-KB byte queue within dnctl's limits, and
// nothing else set (no delay, loss, mask, RED or clock interface). It is a
// hint for people (a pipe that looks like this may be a leftover of
// macake's), never proof of ownership: another tool may configure a pipe
// the same way.
func LooksOwned(c PipeConfig) bool {
	return c.ClockInterface == "" && c.BandwidthBits > 0 && c.BandwidthBits%1000 == 0 &&
		c.BandwidthBits <= MaxRateKbit*1000 &&
		c.QueueSlots == 0 && c.QueueBytes > 0 && c.QueueBytes%1024 == 0 && c.QueueBytes <= MaxQueueKB*1024 &&
		c.DelayMS == 0 && c.PLR == "" && c.Mask == "" && c.RED == ""
}

// looksOwned is LooksOwned for a live pipe, which must also have no flow
// queues attached (macake never creates any).
func looksOwned(lp LivePipe, queuesOn map[int][]int) bool {
	return LooksOwned(lp.Config) && len(queuesOn[lp.Number]) == 0
}

// mainRulesetWarnings reports dummynet rules in the main ruleset besides
// the hook: pf uses the last matching dummynet rule, so another tool's
// rule after the hook can take traffic away from macake's pipes.
func mainRulesetWarnings(live Live, anchor string) []plan.Warning {
	var w []plan.Warning
	target := hookTarget(anchor)
	for _, r := range live.Main.Rules {
		if r.Action == "dummynet-anchor" && r.Anchor == target {
			continue
		}
		w = append(w, plan.Warning{Message: fmt.Sprintf(
			"the main pf ruleset holds another tool's dummynet rule %q; pf uses the last matching dummynet rule, so it may override macake's shaping", r.Text)})
	}
	return w
}

// directionOf maps a rule direction to the shape direction it shapes.
func directionOf(dir string) shape.Direction {
	if dir == "in" {
		return shape.Download
	}
	return shape.Upload
}
