// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/macake/macake/shape"
)

// Desired is the pf and dummynet state macake wants, rendered from a
// shape.State: the anchor's complete rules and one pipe per link and
// direction.
type Desired struct {
	// Options are the tool paths, anchor and pipe range the commands use.
	Options Options
	// Links are the rendered links, in the state's order (by name).
	Links []DesiredLink
	// Warnings note values that had to be clamped to dummynet's limits.
	Warnings []LinkWarning
	// KnownLinks maps link names to slots as the state file assigns them,
	// including links removed from the config whose pipes may still be
	// live (see Options.KnownLinks). It is ownership evidence: Diff treats
	// the pipes of these slots as macake's, and names the leftovers of
	// removed links after them. nil means no state file: then only the
	// pipes named by rules in macake's anchor are macake's.
	KnownLinks map[string]int
	// Unshaped are the links that hold a slot but install nothing, with
	// why (shape.State.Unshaped); Diff names and explains the removal of
	// their leftovers with them. Optional.
	Unshaped []shape.Unshaped
}

// noLongerDesired is the reason for removing a known link's leftovers when
// the desired state does not say why the link is not shaped.
const noLongerDesired = "no longer in the desired state"

// unshapedReason returns why the link named name installs nothing, when
// the desired state says.
func (d Desired) unshapedReason(name string) (string, bool) {
	for _, u := range d.Unshaped {
		if u.Name == name && u.Reason != "" && !d.desires(name) {
			return u.Reason, true
		}
	}
	return "", false
}

// knownPipe reports whether pipe n belongs to a slot in KnownLinks.
func (d Desired) knownPipe(n int) bool {
	slot, ok := d.Options.Pipes.Slot(n)
	if !ok {
		return false
	}
	for _, s := range d.KnownLinks {
		if s == slot {
			return true
		}
	}
	return false
}

// desires reports whether link name is among the desired links.
func (d Desired) desires(name string) bool {
	for _, l := range d.Links {
		if l.Name == name {
			return true
		}
	}
	return false
}

// linkOfPipe names the link that owned pipe n in an earlier
// configuration, if Unshaped or KnownLinks knows it and it is no longer
// desired.
func (d Desired) linkOfPipe(n int) (string, bool) {
	slot, ok := d.Options.Pipes.Slot(n)
	if !ok || len(d.KnownLinks) == 0 && len(d.Unshaped) == 0 {
		return "", false
	}
	for _, u := range d.Unshaped {
		if u.Slot == slot && !d.desires(u.Name) {
			return u.Name, true
		}
	}
	for name, s := range d.KnownLinks {
		if s == slot && !d.desires(name) {
			return name, true
		}
	}
	return "", false
}

// unshapedDirection reports whether pipe n is the pipe of a direction a
// desired link does not shape, with the link and the direction.
func (d Desired) unshapedDirection(n int) (DesiredLink, shape.Direction, bool) {
	slot, ok := d.Options.Pipes.Slot(n)
	if !ok {
		return DesiredLink{}, 0, false
	}
	dir, _ := d.Options.Pipes.Direction(n)
	for _, l := range d.Links {
		if l.Slot == slot && l.Pipes[dir].Number == 0 {
			return l, dir, true
		}
	}
	return DesiredLink{}, 0, false
}

// DesiredLink is one link's share of the desired state.
type DesiredLink struct {
	Name      string
	Interface string
	// Slot is the link's slot, which its pipe numbers derive from; -1
	// when it is not known (a link's rules kept as they are live).
	Slot int
	// Pipes are the upload and download pipes, in that order; a direction
	// the link does not shape has the zero DesiredPipe (Number 0), and no
	// rule sends traffic to it.
	Pipes [2]DesiredPipe
	// Rules are the link's anchor rules, in the form `pfctl -s dummynet`
	// prints them back.
	Rules []string
}

// DesiredPipe is one pipe macake wants.
type DesiredPipe struct {
	Number    int
	Direction shape.Direction
	// Pipe is the requested rate and queue; Quantized what is sent.
	Pipe      shape.Pipe
	Quantized Quantized
}

// LinkWarning is a rendering note about one link.
type LinkWarning struct {
	Link    string
	Message string
}

// Config returns what dnctl will list for the pipe.
func (p DesiredPipe) Config() PipeConfig { return p.Quantized.Config() }

// Rules returns the anchor's complete content, one rule per line, links in
// order. An empty result means the anchor should not exist.
func (d Desired) Rules() []string {
	var rules []string
	for _, l := range d.Links {
		rules = append(rules, l.Rules...)
	}
	return rules
}

// AnchorText returns the text loaded with `pfctl -a ANCHOR -f -`.
func (d Desired) AnchorText() string {
	rules := d.Rules()
	if len(rules) == 0 {
		return ""
	}
	return strings.Join(rules, "\n") + "\n"
}

// Render turns the desired state into pf rules and dummynet pipes. It fails
// when the state cannot be expressed: two links on one interface or one
// slot, a slot outside the pipe range, an interface name pf cannot take.
func Render(s shape.State, opts Options) (Desired, error) {
	if err := opts.Validate(); err != nil {
		return Desired{}, err
	}
	d := Desired{Options: opts, Unshaped: s.Unshaped}
	links := append([]shape.Link(nil), s.Links...)
	sort.SliceStable(links, func(i, j int) bool { return links[i].Name < links[j].Name })
	byIface := map[string]string{}
	bySlot := map[int]string{}
	for _, l := range links {
		if l.Name == "" {
			return Desired{}, fmt.Errorf("a link on %q has no name", l.Interface)
		}
		if err := shape.CheckInterfaceName(l.Interface); err != nil {
			return Desired{}, fmt.Errorf("link %q: interface: %w", l.Name, err)
		}
		if other, dup := byIface[l.Interface]; dup {
			return Desired{}, fmt.Errorf("links %q and %q both want interface %s; only one link can be active per interface", other, l.Name, l.Interface)
		}
		byIface[l.Interface] = l.Name
		if other, dup := bySlot[l.Slot]; dup {
			return Desired{}, fmt.Errorf("links %q and %q share slot %d; each link needs its own pipes", other, l.Name, l.Slot)
		}
		bySlot[l.Slot] = l.Name
		dl := DesiredLink{Name: l.Name, Interface: l.Interface, Slot: l.Slot}
		for i, dir := range shape.Directions {
			n, err := opts.Pipes.Pipe(l.Slot, dir)
			if err != nil {
				return Desired{}, fmt.Errorf("link %q: %w", l.Name, err)
			}
			if !l.Pipe(dir).Shaped() {
				continue
			}
			q := Quantize(l.Pipe(dir))
			for _, note := range q.Notes {
				d.Warnings = append(d.Warnings, LinkWarning{Link: l.Name, Message: dir.String() + ": " + note})
			}
			dl.Pipes[i] = DesiredPipe{Number: n, Direction: dir, Pipe: l.Pipe(dir), Quantized: q}
		}
		rules, warns := linkRules(l, dl.Pipes[0].Number, dl.Pipes[1].Number)
		for _, w := range warns {
			d.Warnings = append(d.Warnings, LinkWarning{Link: l.Name, Message: w})
		}
		dl.Rules = rules
		d.Links = append(d.Links, dl)
	}
	return d, nil
}

// linkRules renders DESIGN §2's rules for one link. The reflector lists are
// written out one rule per reflector, with the family, protocol and port
// spelled the way pfctl prints them back (`inet proto icmp`, `inet6 proto
// ipv6-icmp`: pfctl prints protocol names from /etc/protocols, where 58 is
// ipv6-icmp; `port = 443`), so the text loaded is exactly the text `pfctl
// -s dummynet` shows, and comparing the two needs no guesswork about list
// expansion. The shaping rules name no family, so IPv6 is shaped too.
//
// An ICMP reflector exempts ICMP to and from its address; a TCP or UDP
// reflector exempts that protocol to its port and from its port, which is
// where the handshake's SYN goes and its SYN-ACK or RST (or the echo)
// comes from.
//
// The reflectors are sorted, so the rules are a function of the reflector
// set, not its order: watch (whose controllers shuffle their reflectors)
// and a one-shot plan from the policy's list render the same anchor, and
// neither sees the other's rules as a change. The exemptions are `quick`
// and never overlap, so their order does not change what pf does.
func linkRules(l shape.Link, up, down int) (rules, warnings []string) {
	var keep []shape.Reflector
	for _, r := range shape.SortedReflectors(l.Reflectors) {
		if r.Addr.Zone() != "" {
			warnings = append(warnings, fmt.Sprintf("reflector %s has a zone, which pf rules cannot name; its probes are not exempt from shaping", r))
			continue
		}
		if r.Kind.HasPort() && r.Port == 0 {
			warnings = append(warnings, fmt.Sprintf("reflector %s has no port; its probes are not exempt from shaping", r))
			continue
		}
		keep = append(keep, r)
	}
	// IPv4 sorts first; each family's rules to the reflectors come before
	// its rules from them.
	v6 := slices.IndexFunc(keep, func(r shape.Reflector) bool { return !r.Addr.Is4() })
	if v6 < 0 {
		v6 = len(keep)
	}
	for _, family := range [][]shape.Reflector{keep[:v6], keep[v6:]} {
		for _, r := range family {
			rules = append(rules, fmt.Sprintf("no dummynet quick on %s %s from any to %s", l.Interface, pfProto(r), pfHost(r)))
		}
		for _, r := range family {
			rules = append(rules, fmt.Sprintf("no dummynet quick on %s %s from %s to any", l.Interface, pfProto(r), pfHost(r)))
		}
	}
	// A direction the link does not shape has no rule (its pipe number is
	// 0): its traffic passes untouched.
	if up != 0 {
		rules = append(rules, fmt.Sprintf("dummynet out on %s all pipe %d", l.Interface, up))
	}
	if down != 0 {
		rules = append(rules, fmt.Sprintf("dummynet in on %s all pipe %d", l.Interface, down))
	}
	return rules, warnings
}

// pfProto is a reflector's family and protocol as pfctl prints them.
func pfProto(r shape.Reflector) string {
	af := "inet"
	if !r.Addr.Is4() {
		af = "inet6"
	}
	switch r.Kind {
	case shape.ProbeTCP:
		return af + " proto tcp"
	case shape.ProbeUDP:
		return af + " proto udp"
	}
	if af == "inet6" {
		return "inet6 proto ipv6-icmp"
	}
	return "inet proto icmp"
}

// pfHost is a reflector's address, and its port where it has one, as
// pfctl prints them: "1.1.1.1", "1.1.1.1 port = 443".
func pfHost(r shape.Reflector) string {
	if r.Kind.HasPort() {
		return r.Addr.String() + " port = " + strconv.Itoa(int(r.Port))
	}
	return r.Addr.String()
}

// label returns the human name of a desired pipe, e.g. `pipe 48001 "wan/upload"`.
func pipeLabel(n int, link string, d shape.Direction) string {
	return fmt.Sprintf("pipe %d %q", n, link+"/"+d.String())
}
