// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// PlanLink implements backend.LinkPlanner: Plan, limited to one link. The
// anchor is one object holding every link's rules, loaded whole, so the
// plan reloads it with link's rules as desired and every other
// interface's rules as they are live; only link's pipes are created,
// updated or deleted; the pf reference is taken or released as the
// merged anchor needs it.
func (b *Backend) PlanLink(ctx context.Context, desired shape.State, link string) (plan.Plan, error) {
	d, live, err := b.observed(ctx, desired)
	if err != nil {
		return plan.Plan{}, err
	}
	scoped, err := ScopeToLink(d, live, link)
	if err != nil {
		return plan.Plan{}, err
	}
	p := Diff(scoped, live, b.heldToken(&live))
	return p.OnlyLink(link, sharedOp), CheckHook(scoped, live)
}

// ScopeToLink returns the desired state that changes only link: link as d
// wants it (or gone, when d does not shape it), and on every interface
// whose live rules are not link's, those rules as they are, under the
// name of the link that holds their pipes. It is pure. It fails when link
// would take over an interface whose live rules are another link's: that
// change touches two links, so only a whole apply can make it.
func ScopeToLink(d Desired, live Live, link string) (Desired, error) {
	slotOwner := map[int]string{}
	for name, slot := range d.KnownLinks {
		slotOwner[slot] = name
	}
	owner := func(pipe int) string {
		if slot, ok := d.Options.Pipes.Slot(pipe); ok {
			return slotOwner[slot]
		}
		return ""
	}
	// The live rules by interface, with the link their pipes belong to.
	type group struct {
		iface, owner string
		rules        []string
	}
	var groups []*group
	byIface := map[string]*group{}
	if live.Anchor.Exists {
		for _, r := range live.Anchor.Rules {
			g := byIface[r.Interface]
			if g == nil {
				g = &group{iface: r.Interface}
				byIface[r.Interface] = g
				groups = append(groups, g)
			}
			g.rules = append(g.rules, r.Text)
			if o := owner(r.Pipe); r.Pipe != 0 && o != "" && g.owner == "" {
				g.owner = o
			}
		}
	}
	var mine *DesiredLink
	for i, l := range d.Links {
		if l.Name == link {
			mine = &d.Links[i]
		}
	}
	out := d
	out.Links = nil
	if mine != nil {
		if g := byIface[mine.Interface]; g != nil && g.owner != "" && g.owner != link {
			return Desired{}, fmt.Errorf("link %q would take interface %s over from link %q, whose rules are live there; that changes two links, so apply them together (without --link)", link, mine.Interface, g.owner)
		}
		out.Links = append(out.Links, *mine)
	}
	for _, g := range groups {
		if g.owner == link || mine != nil && g.iface == mine.Interface {
			continue // link's own rules: replaced by what d wants
		}
		pinned := DesiredLink{Name: g.owner, Interface: g.iface, Rules: g.rules, Slot: -1}
		if slot, ok := d.KnownLinks[g.owner]; ok && g.owner != "" {
			pinned.Slot = slot
			// Its pipes stay desired, so the plan never deletes them.
			// Only the live ones: a direction the link does not shape
			// has no pipe, and pinning one would create it.
			for i, dir := range shape.Directions {
				if n, err := d.Options.Pipes.Pipe(slot, dir); err == nil {
					if lp, ok := live.Dummynet.Pipe(n); ok {
						pinned.Pipes[i] = DesiredPipe{Number: n, Direction: dir,
							Quantized: Quantized{RateKbit: lp.Config.BandwidthBits / 1000, QueueKB: lp.Config.QueueBytes / 1024}}
					}
				}
			}
		}
		out.Links = append(out.Links, pinned)
	}
	// The order Render gives the anchor (by link name), so that the
	// whole apply that follows one day sees the same text.
	sort.SliceStable(out.Links, func(i, j int) bool { return out.Links[i].Name < out.Links[j].Name })
	out.Warnings = slices.DeleteFunc(slices.Clone(d.Warnings), func(w LinkWarning) bool { return w.Link != link })
	return out, nil
}

// sharedOp reports the ops a plan for one link keeps although they belong
// to no link: the anchor, which holds every link's rules, and the pf
// enable reference.
func sharedOp(op plan.Op) bool { return op.Kind == KindRules || op.Kind == KindPFReference }
