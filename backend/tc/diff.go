// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/shape"
)

// Diff returns the ordered operations that make live match desired. It is
// pure: it reads only its arguments.
//
// Order: per link (by name), the upload shaper and its probe exemptions,
// then the IFB, its shaper, the ingress hook, the ingress exemptions and
// last the redirect, so traffic is only sent to an IFB that is ready. Then
// the removals of everything owned that is no longer wanted: ingress
// filters first, then IFB devices, then root qdiscs, so a redirect never
// points at a missing device.
//
// Objects macake does not own never appear in the plan; where one blocks
// macake (a foreign root qdisc, a foreign filter at macake's priority), the
// plan carries a warning instead.
func Diff(desired shape.State, live Live) plan.Plan {
	d := &differ{live: live, t: live.Tools, claimed: map[string]bool{}, wanted: map[string]bool{}, desired: desired, off: map[string]string{}}
	d.p.Ops, d.p.Warnings = []plan.Op{}, []plan.Warning{}
	links := slices.Clone(desired.Links)
	sort.SliceStable(links, func(i, j int) bool { return links[i].Name < links[j].Name })
	ifaces, slots := map[string]string{}, map[int]string{}
	for _, l := range links {
		if err := checkLink(l); err != nil {
			d.unshaped(l.Name, err.Error()+"; link skipped, its live shaping kept", bothDirections...)
			d.keep(l)
			continue
		}
		if other, dup := ifaces[l.Interface]; dup {
			d.unshaped(l.Name, fmt.Sprintf("interface %s is already shaped by link %q; link skipped", l.Interface, other), bothDirections...)
			continue
		}
		if other, dup := slots[l.Slot]; dup {
			d.unshaped(l.Name, fmt.Sprintf("slot %d is already used by link %q; link skipped", l.Slot, other), bothDirections...)
			continue
		}
		ifaces[l.Interface], slots[l.Slot] = l.Name, l.Name
		if l.Upload.Shaped() {
			d.wanted[l.Interface] = true
		}
		d.link(l)
	}
	d.removals()
	return d.p
}

// keep claims what is live for a link that cannot be rendered, so that
// it stays as it is rather than being removed: a bad link never tears
// down working shaping.
func (d *differ) keep(l shape.Link) {
	devs := []string{l.Interface}
	if l.Slot >= 0 && l.Slot <= MaxSlot {
		devs = append(devs, IFBName(l.Slot))
		d.claimed["ifb/"+IFBName(l.Slot)] = true
	}
	for _, dev := range devs {
		for _, kind := range []string{"root", "hook", "exempt-egress", "exempt-ingress", "redirect"} {
			d.claimed[kind+"/"+dev] = true
		}
		d.wanted[dev] = true
	}
}

type differ struct {
	live Live
	t    Tools
	p    plan.Plan
	// claimed holds the owned objects the desired state keeps, as
	// "kind/device"; everything owned and unclaimed is removed.
	claimed map[string]bool
	// wanted holds the interfaces a desired link shapes, present or not:
	// their ownership record is kept.
	wanted map[string]bool
	// desired is the whole desired state; its Unshaped links explain
	// removals.
	desired shape.State
	// off names, by device, the desired link that no longer shapes the
	// direction that device's objects served (its root qdisc for upload,
	// "ingress/"+interface for the redirect, IFB: download), so their
	// removal says so.
	off map[string]string
}

var bothDirections = []shape.Direction{shape.Upload, shape.Download}

func (d *differ) warn(link, msg string) {
	d.p.Warnings = append(d.p.Warnings, plan.Warning{Link: link, Message: msg})
}

// unshaped warns about a finding that leaves dirs of the link unshaped.
func (d *differ) unshaped(link, msg string, dirs ...shape.Direction) {
	w := plan.Warning{Link: link, Message: msg}
	for _, dir := range dirs {
		w.Unshaped = append(w.Unshaped, dir.String())
	}
	d.p.Warnings = append(d.p.Warnings, w)
}

func (d *differ) add(op plan.Op) {
	if op.Action == "" {
		return
	}
	if op.Action == plan.Create && op.Reason == "" {
		// As pfdn says it: logs and doctor print "LABEL: REASON", and an
		// empty reason leaves a dangling colon.
		op.Reason = "not present"
	}
	d.p.Ops = append(d.p.Ops, op)
}

func (d *differ) link(l shape.Link) {
	caps := d.live.Caps
	dev := d.live.Devices[l.Interface]
	if dev == nil {
		d.unshaped(l.Name, fmt.Sprintf("interface %s not found; the link is shaped once it appears", l.Interface), bothDirections...)
		return
	}
	if caps.Shaper() == "" {
		d.unshaped(l.Name, "the kernel has neither sch_cake nor sch_htb with bfifo; nothing can be shaped (see `macake doctor`)", bothDirections...)
		return
	}
	if lost := cakeOnlyOptions(l.Cake); !caps.ShapesWithCake() && len(lost) > 0 {
		d.warn(l.Name, fmt.Sprintf("this kernel has no sch_cake, so %s cannot be applied; shaping with htb+bfifo instead (a rate and one byte-limited queue per direction)", joinAnd(lost)))
	}
	if !l.Upload.Shaped() {
		d.off["root/"+l.Interface] = l.Name
	} else if up := specFor(l, shape.Upload, caps.ShapesWithCake()); !d.refused(l, dev, up) {
		d.shaper(l, up, dev, false)
	}
	if !l.Download.Shaped() {
		// No IFB, no redirect: download passes untouched.
		d.off["ingress/"+l.Interface], d.off["ifb/"+IFBName(l.Slot)] = l.Name, l.Name
		return
	}

	if !caps.CanShapeDownload() {
		d.unshaped(l.Name, "download is not shaped: the kernel lacks "+missingForDownload(caps)+" (see `macake doctor`)", shape.Download)
		return
	}
	name := IFBName(l.Slot)
	ifb := d.live.Devices[name]
	if ifb != nil && ifb.Kind != "ifb" {
		d.unshaped(l.Name, fmt.Sprintf("a %s device named %s exists that macake did not create; download is not shaped until it is removed or renamed", orUnknown(ifb.Kind), name), shape.Download)
		return
	}
	down := specFor(l, shape.Download, caps.ShapesWithCake())
	if d.refused(l, dev, down) {
		return
	}
	d.ifb(l, ifb)
	d.shaper(l, down, ifb, true)
	d.hook(l, dev)
	d.exemptions(l, dev, ingressHook, caps.ShapesWithCake(), false)
	d.redirect(l, dev, name)
}

// refused reports whether the kernel or tc refused the CAKE options of s
// when they were tried; then every object of that direction of l stays
// as it is live (nothing is planned for it, nothing of it removed) and a
// warning says which option, and what to do.
func (d *differ) refused(l shape.Link, dev *DeviceState, s shaperSpec) bool {
	r, refused := cakeRefusalOf(d.live, s)
	if !refused {
		return false
	}
	var keep []string
	shaped := false
	if s.dir == shape.Upload {
		keep = []string{"root/" + dev.Name, "exempt-egress/" + dev.Name}
		shaped = dev.ownsRoot()
	} else {
		ifb := IFBName(l.Slot)
		keep = []string{"ifb/" + ifb, "root/" + ifb, "hook/" + dev.Name, "exempt-ingress/" + dev.Name, "redirect/" + dev.Name}
		shaped = d.live.Devices[ifb].ownsRoot()
	}
	for _, k := range keep {
		d.claimed[k] = true
	}
	if shaped {
		d.warn(l.Name, fmt.Sprintf("%s; the %s shaper in force is left as it is", r, s.dir))
	} else {
		d.unshaped(l.Name, fmt.Sprintf("%s; %s is not shaped until the policy or the system changes", r, s.dir), s.dir)
	}
	return true
}

func missingForDownload(c Capabilities) string {
	var m []string
	for _, f := range []struct {
		ok   bool
		name string
	}{{c.Ingress, "sch_ingress"}, {c.U32, "cls_u32"}, {c.Mirred, "act_mirred"}, {c.IFB, "ifb"}} {
		if !f.ok {
			m = append(m, f.name)
		}
	}
	return joinAnd(m)
}

func orUnknown(kind string) string {
	if kind == "" {
		return "non-IFB"
	}
	return kind
}

func pipeLabel(l shape.Link, dir shape.Direction) string {
	return strconv.Quote(l.Name + "/" + dir.String())
}

// liveKind names the shaper on dev the way plan fields name shapers:
// "htb+bfifo", "cake" (macake's prio with its CAKE leaf), or the root
// qdisc's kind.
func liveKind(dev *DeviceState) string {
	root := dev.Root()
	switch {
	case root == nil:
		return ""
	case root.Kind == "htb":
		return "htb+bfifo"
	case root.Handle == RootHandle && root.Kind == "prio" && dev.cakeLeaf() != nil:
		return "cake"
	}
	return root.Kind
}

// shaper plans the root qdisc of one direction on dev (nil: the device is
// created earlier in this plan). ownDevice is true for macake's IFB, where
// whatever is attached is macake's to replace.
func (d *differ) shaper(l shape.Link, s shaperSpec, dev *DeviceState, ownDevice bool) {
	op := plan.Op{Link: l.Name, Interface: l.Interface, Kind: KindShaper, ID: s.dev,
		Label: fmt.Sprintf("shaper on %s %s", s.dev, pipeLabel(l, s.dir))}
	root := dev.Root()
	rebuilt := true
	switch {
	case root != nil && root.Handle == RootHandle:
		if rootLayout(root) == s.layout() {
			if s.cake {
				rebuilt = d.updateCake(&op, s, dev, root)
			} else {
				rebuilt = false
				d.updateHTB(&op, s, dev, root)
			}
			break
		}
		kind := liveKind(dev)
		op.Action, op.Reason = plan.Update, fmt.Sprintf("qdisc is %s, want %s", kind, s.kindName())
		if root.Kind == "cake" {
			// An older macake put CAKE itself at the root, where nothing
			// can let the probes bypass it.
			kind = "cake at the root"
			op.Reason = "cake is at the root, where macake's probes cannot bypass it; rebuilt under prio, which lets them"
		}
		op.Fields = createFields(s)
		op.Fields[0].Before, op.Fields[0].BeforeValue = kind, kind
		op.Commands = append([]execrun.Command{d.t.deleteRoot(s.dev)}, d.t.createShaper("add", s)...)
	case root == nil || root.Handle == 0:
		// Handle 0: is the kernel's own default (noqueue, pfifo_fast, mq,
		// fq_codel, fq): tc cannot create a qdisc with that handle.
		op.Action, op.Fields = plan.Create, createFields(s)
		op.Commands = d.t.createShaper("add", s)
	case ownDevice:
		op.Action, op.Reason = plan.Update, fmt.Sprintf("%s %s replaced macake's shaper on its own IFB", root.Kind, FormatHandle(root.Handle))
		op.Fields = createFields(s)
		op.Fields[0].Before, op.Fields[0].BeforeValue = root.Kind, root.Kind
		op.Commands = d.t.createShaper("replace", s)
	case d.live.OwnedRoots[s.dev]:
		// macake put its shaper here and never removed it: whoever put
		// this qdisc in its place replaced macake's, which is drift.
		// `replace` swaps it in one step, so the interface is never left
		// without a qdisc.
		op.Action = plan.Update
		op.Reason = fmt.Sprintf("root qdisc on %s replaced by someone else (%s %s); restoring macake's shaper", s.dev, root.Kind, FormatHandle(root.Handle))
		op.Fields = createFields(s)
		op.Fields[0].Before, op.Fields[0].BeforeValue = root.Kind+" "+FormatHandle(root.Handle), root.Kind
		op.Commands = d.t.createShaper("replace", s)
	default:
		d.unshaped(l.Name, fmt.Sprintf("%s has a root qdisc macake does not own (%s %s), so %s is not shaped; macake never replaces another tool's qdisc. To let macake shape %s, remove it: tc qdisc del dev %s root",
			s.dev, root.Kind, FormatHandle(root.Handle), s.dir, s.dev, s.dev), s.dir)
		return
	}
	d.claimed["root/"+s.dev] = true
	d.add(op)
	if s.dir == shape.Upload {
		d.exemptions(l, dev, egressHook, s.cake, rebuilt)
	}
}

// createFields lists every attribute of a new shaper; the first is always
// the qdisc kind. CAKE's options appear where they are not CAKE's
// defaults, besides diffserv, isolation and nat, which always do.
func createFields(s shaperSpec) []plan.Field {
	f := []plan.Field{
		{Name: "qdisc", Key: "qdisc", After: s.kindName(), AfterValue: s.kindName()},
		{Name: "bandwidth", Key: "bandwidth_bits_per_second", After: shape.FormatRateShort(s.pipe.RateBits), AfterValue: s.pipe.RateBits},
	}
	if !s.cake {
		f = append(f, plan.Field{Name: "queue", Key: "queue_bytes", After: shape.FormatBytes(s.pipe.QueueBytes), AfterValue: s.pipe.QueueBytes})
	}
	if s.overhead != 0 {
		f = append(f, plan.Field{Name: "overhead", Key: "overhead_bytes", After: strconv.Itoa(s.overhead), AfterValue: s.overhead})
	}
	if s.mpu != 0 {
		f = append(f, plan.Field{Name: "mpu", Key: "mpu_bytes", After: strconv.Itoa(s.mpu), AfterValue: s.mpu})
	}
	if !s.cake {
		return f
	}
	for _, o := range cakeFields(s, nil) {
		if o.always || o.want != o.dflt {
			f = append(f, plan.Field{Name: o.name, Key: o.key, After: o.want, AfterValue: o.wantValue()})
		}
	}
	return f
}

// cakeField is one CAKE option as the plan shows it: what the shaper
// wants, what is live (c, when given) and CAKE's default, as text.
type cakeField struct {
	name, key        string
	want, live, dflt string
	// always shows the option when a shaper is created, default or not.
	always bool
	// boolean fields carry true/false as their JSON value.
	boolean bool
}

func (f cakeField) wantValue() any {
	if f.boolean {
		return f.want == "true"
	}
	return f.want
}

func (f cakeField) liveValue() any {
	if f.boolean {
		return f.live == "true"
	}
	return f.live
}

// cakeFields lists CAKE's options beyond the bandwidth, overhead and mpu
// (compared on their own), wanted by s and, with c, live.
func cakeFields(s shaperSpec, c *CakeOptions) []cakeField {
	if c == nil {
		c = &CakeOptions{}
	}
	tf := strconv.FormatBool
	memlimit := func(v int64) string {
		if v == 0 {
			return "auto"
		}
		return shape.FormatBytes(v)
	}
	f := []cakeField{
		{name: "diffserv", key: "diffserv", want: s.diffserv, live: c.Diffserv, dflt: cakeDefaultDiffserv, always: true},
		{name: "isolation", key: "isolation", want: s.flowmode, live: c.FlowMode, dflt: cakeDefaultFlowMode, always: true},
		{name: "nat", key: "nat", want: tf(s.nat), live: tf(c.NAT), dflt: "false", always: true, boolean: true},
		{name: "wash", key: "wash", want: tf(s.wash), live: tf(c.Wash), dflt: "false", boolean: true},
		{name: "split-gso", key: "split_gso", want: tf(s.splitGSO), live: tf(c.SplitGSO), dflt: "true", boolean: true},
		{name: "rtt", key: "rtt", want: formatMicros(s.rttMicros), live: formatMicros(c.RTTMicros), dflt: formatMicros(cakeDefaultRTTMicros)},
		{name: "memlimit", key: "memlimit", want: memlimit(s.memlimit), live: memlimit(c.MemLimit), dflt: "auto"},
		{name: "link layer", key: "link_layer", want: s.linkLayer, live: c.linkLayer(), dflt: cakeDefaultLinkLayer},
		{name: "ack-filter", key: "ack_filter", want: pick(s.ackFilter, "enabled", "disabled"), live: orDisabled(c.ACKFilter), dflt: "disabled", always: s.dir == shape.Upload},
		{name: "mode", key: "cake_mode", want: pick(s.ing, "ingress", "egress"), live: pick(c.Ingress, "ingress", "egress"), dflt: pick(s.ing, "ingress", "egress")},
	}
	return f
}

// cakeNeedsRebuild names the options that are live with a value a `tc
// qdisc change` cannot take back to what s wants, because tc sends them
// only when they differ from CAKE's default: diffserv3, mpu 0 and an
// automatic memlimit. The qdisc must then be deleted and added again.
func cakeNeedsRebuild(s shaperSpec, c *CakeOptions) []string {
	var out []string
	if s.diffserv == cakeDefaultDiffserv && c.Diffserv != cakeDefaultDiffserv {
		out = append(out, cakeDefaultDiffserv)
	}
	if s.mpu == 0 && c.MPU != 0 {
		out = append(out, "mpu 0")
	}
	if s.memlimit == 0 && c.MemLimit != 0 {
		out = append(out, "an automatic memlimit")
	}
	return out
}

// fieldSet accumulates changed and unchanged attributes of one object.
type fieldSet struct {
	changed   []plan.Field
	unchanged int
}

func (fs *fieldSet) compare(same bool, f plan.Field) {
	if same {
		fs.unchanged++
		return
	}
	fs.changed = append(fs.changed, f)
}

func (fs *fieldSet) apply(op *plan.Op, cmds []execrun.Command) {
	op.Unchanged = fs.unchanged
	if len(fs.changed) == 0 {
		return
	}
	op.Action, op.Fields, op.Commands = plan.Update, fs.changed, cmds
	names := make([]string, len(fs.changed))
	for i, f := range fs.changed {
		names[i] = f.Name
	}
	verb := " differs"
	if len(names) > 1 {
		verb = " differ"
	}
	op.Reason = joinAnd(names) + verb
}

// sameRate compares a desired rate with a live one: exactly (to the byte,
// as the kernel keeps it) when live came from JSON, otherwise after tc's
// text truncation.
func sameRate(want, live int64, exact bool) bool {
	if exact {
		return want/8 == live/8
	}
	return quantiseRate(want) == quantiseRate(live)
}

func rateField(want, live int64) plan.Field {
	f := plan.Field{Name: "bandwidth", Key: "bandwidth_bits_per_second", After: shape.FormatRateShort(want), AfterValue: want}
	if live > 0 {
		f.BeforeValue = live
		f.Before, f.After = shape.FormatRateChange(live, want)
	}
	return f
}

func intField(name, key string, want, live int) plan.Field {
	return plan.Field{Name: name, Key: key, Before: strconv.Itoa(live), After: strconv.Itoa(want), BeforeValue: live, AfterValue: want}
}

func (d *differ) updateHTB(op *plan.Op, s shaperSpec, dev *DeviceState, root *Qdisc) {
	var fs fieldSet
	var cmds []execrun.Command
	fs.unchanged++ // the qdisc kind
	if root.HTBDefault != 1 {
		fs.compare(false, plan.Field{Name: "default class", Key: "default_class", Before: FormatHandle(root.HTBDefault), After: ":1", BeforeValue: root.HTBDefault, AfterValue: 1})
		cmds = append(cmds, d.t.tcCmd("qdisc", "change", "dev", s.dev, "root", "handle", rootHandleArg, "htb", "default", "1"))
	} else {
		fs.unchanged++
	}
	before := len(fs.changed)
	if c := dev.Class(ClassHandle); c == nil {
		fs.compare(false, rateField(s.pipe.RateBits, 0))
		if s.overhead != 0 {
			fs.compare(false, intField("overhead", "overhead_bytes", s.overhead, 0))
		}
		if s.mpu != 0 {
			fs.compare(false, intField("mpu", "mpu_bytes", s.mpu, 0))
		}
	} else {
		fs.compare(sameRate(s.pipe.RateBits, c.RateBits, c.Exact) && sameRate(s.pipe.RateBits, c.CeilBits, c.Exact), rateField(s.pipe.RateBits, c.RateBits))
		fs.compare(c.Overhead == s.overhead, intField("overhead", "overhead_bytes", s.overhead, c.Overhead))
		fs.compare(c.MPU == s.mpu, intField("mpu", "mpu_bytes", s.mpu, c.MPU))
	}
	if len(fs.changed) > before {
		cmds = append(cmds, d.t.tcCmd(htbClassArgs("replace", s)...))
	}
	queue := plan.Field{Name: "queue", Key: "queue_bytes", After: shape.FormatBytes(s.pipe.QueueBytes), AfterValue: s.pipe.QueueBytes}
	switch leaf := dev.Leaf(ClassHandle); {
	case leaf == nil:
		fs.compare(false, queue)
		cmds = append(cmds, d.t.tcCmd(leafArgs("replace", s)...))
	case leaf.Kind == "bfifo" && leaf.Handle == LeafHandle:
		queue.Before, queue.BeforeValue = shape.FormatBytes(leaf.Limit), leaf.Limit
		fs.compare(leaf.Limit == s.pipe.QueueBytes, queue)
		if leaf.Limit != s.pipe.QueueBytes {
			cmds = append(cmds, d.t.tcCmd(leafArgs("replace", s)...))
		}
	default:
		queue.Before, queue.BeforeValue = leaf.Kind+" "+FormatHandle(leaf.Handle), leaf.Kind
		fs.compare(false, queue)
		if leaf.Handle == LeafHandle {
			// The kernel cannot change a qdisc's kind in place.
			cmds = append(cmds, d.t.deleteLeaf(s.dev, classHandleArg))
		}
		cmds = append(cmds, d.t.tcCmd(leafArgs("replace", s)...))
	}
	fs.apply(op, cmds)
}

// updateCake plans the changes to macake's prio root and its CAKE leaf,
// with the least disruptive operation: a change of the leaf in place
// (its queue kept) where tc can express it, a new leaf otherwise, and a
// new shaper only when the prio root itself is wrong. It returns whether
// the root (and the filters on it) is rebuilt.
func (d *differ) updateCake(op *plan.Op, s shaperSpec, dev *DeviceState, root *Qdisc) (rebuilt bool) {
	var fs fieldSet
	fs.unchanged++ // the qdisc kind
	if !isOurPrio(root.Prio) {
		// Someone changed the bands or the priomap: CAKE may no longer see
		// the traffic. prio's bands cannot be reshaped with their
		// children in place, so the whole shaper is built again.
		fs.compare(false, plan.Field{Name: "prio", Key: "prio", Before: describePrio(root.Prio), After: describePrio(&ourPrio), BeforeValue: describePrio(root.Prio), AfterValue: describePrio(&ourPrio)})
		fs.apply(op, append([]execrun.Command{d.t.deleteRoot(s.dev)}, d.t.createShaper("add", s)...))
		return true
	}
	fs.unchanged++
	leaf := dev.Leaf(CakeClass)
	if leaf == nil || leaf.Kind != "cake" || leaf.Handle != LeafHandle {
		var cmds []execrun.Command
		before := "none"
		if leaf != nil {
			before = leaf.Kind + " " + FormatHandle(leaf.Handle)
			if leaf.Handle == LeafHandle {
				// The kernel cannot change a qdisc's kind in place.
				cmds = append(cmds, d.t.deleteLeaf(s.dev, cakeParentArg))
			}
		}
		fs.compare(false, plan.Field{Name: "cake", Key: "cake_leaf", Before: before, After: "cake " + leafHandleArg, BeforeValue: before, AfterValue: "cake " + leafHandleArg})
		fs.apply(op, append(cmds, d.t.tcCmd(leafArgs("replace", s)...)))
		return false
	}
	c := leaf.Cake
	if c == nil {
		c = &CakeOptions{}
	}
	liveBits := int64(c.BandwidthBytes) * 8
	fs.compare(uint64(s.pipe.RateBits/8) == c.BandwidthBytes, rateField(s.pipe.RateBits, liveBits))
	for _, f := range cakeFields(s, c) {
		fs.compare(f.want == f.live, plan.Field{Name: f.name, Key: f.key, Before: f.live, After: f.want, BeforeValue: f.liveValue(), AfterValue: f.wantValue()})
	}
	wantRaw := s.overhead == 0 && s.mpu == 0
	fs.compare(wantRaw == c.Raw && s.overhead == c.Overhead, intField("overhead", "overhead_bytes", s.overhead, c.Overhead))
	fs.compare(s.mpu == c.MPU, intField("mpu", "mpu_bytes", s.mpu, c.MPU))
	cmds := []execrun.Command{d.t.tcCmd(leafArgs("change", s)...)}
	back := cakeNeedsRebuild(s, c)
	if len(back) > 0 {
		cmds = []execrun.Command{d.t.deleteLeaf(s.dev, cakeParentArg), d.t.tcCmd(leafArgs("add", s)...)}
	}
	fs.apply(op, cmds)
	if len(back) > 0 && len(fs.changed) > 0 {
		op.Reason += fmt.Sprintf("; tc cannot change CAKE back to %s in place, so its qdisc is replaced (its queue is lost)", joinAnd(back))
	}
	return false
}

// ourPrio is the prio root CAKE hangs from: two bands, every packet to
// the shaped one unless an exemption picks band 0.
var ourPrio = func() PrioOptions {
	p := PrioOptions{Bands: prioBands}
	for i := range p.Priomap {
		p.Priomap[i] = prioShapedBand
	}
	return p
}()

func isOurPrio(p *PrioOptions) bool { return p != nil && *p == ourPrio }

func describePrio(p *PrioOptions) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprintf("bands %d priomap %v", p.Bands, p.Priomap)
}

func orDisabled(s string) string {
	if s == "" {
		return "disabled"
	}
	return s
}

func (d *differ) ifb(l shape.Link, dev *DeviceState) {
	name := IFBName(l.Slot)
	d.claimed["ifb/"+name] = true
	op := plan.Op{Link: l.Name, Interface: l.Interface, Kind: "ifb", ID: name,
		Label: fmt.Sprintf("ifb %s %s", name, pipeLabel(l, shape.Download))}
	up := plan.Field{Name: "state", Key: "state", After: "up", AfterValue: "up"}
	switch {
	case dev == nil:
		op.Action = plan.Create
		op.Fields = []plan.Field{{Name: "type", Key: "type", After: "ifb", AfterValue: "ifb"}, up}
		op.Commands = []execrun.Command{
			d.t.ipCmd("link", "add", "name", name, "type", "ifb"),
			d.t.ipCmd("link", "set", "dev", name, "up"),
		}
	case !dev.Up:
		up.Before, up.BeforeValue = "down", "down"
		op.Action, op.Reason, op.Fields, op.Unchanged = plan.Update, "state differs", []plan.Field{up}, 1
		op.Commands = []execrun.Command{d.t.ipCmd("link", "set", "dev", name, "up")}
	}
	d.add(op)
}

// hook makes sure the interface has an ingress hook (an ingress or clsact
// qdisc) to attach the redirect to.
func (d *differ) hook(l shape.Link, dev *DeviceState) {
	d.claimed["hook/"+dev.Name] = true
	if dev.Hook() != nil {
		return
	}
	d.add(plan.Op{Link: l.Name, Interface: dev.Name, Kind: KindIngress, Role: plan.RoleRules, ID: dev.Name, Action: plan.Create,
		Label:    "ingress qdisc on " + dev.Name,
		Fields:   []plan.Field{{Name: "qdisc", Key: "qdisc", After: "ingress", AfterValue: "ingress"}},
		Commands: []execrun.Command{d.t.tcCmd("qdisc", "add", "dev", dev.Name, "handle", "ffff:", "ingress")},
	})
}

func isOurRedirect(f Filter) bool {
	if f.Pref != RedirectPref || f.Kind != "u32" || len(f.Actions) != 1 {
		return false
	}
	a := f.Actions[0]
	if a.Kind != "mirred" || a.Mirred != "redirect" {
		return false
	}
	if _, ours := IFBSlot(a.ToDev); ours {
		return true
	}
	// When someone deletes the IFB, tc shows the redirect's target as "*"
	// and the filter drops every packet: it is macake's to repair.
	return a.ToDev == "*" && sameKeys(f.Keys, []U32Key{{}})
}

func isOurExemption(f Filter, h hook, cake bool) bool {
	if f.Kind != "u32" || len(f.Actions) != 0 || f.FlowID != exemptFlowID(h, cake) {
		return false
	}
	if !(f.Pref == ExemptIPv4Pref && f.Protocol == "ip") && !(f.Pref == ExemptIPv6Pref && f.Protocol == "ipv6") {
		return false
	}
	_, ok := exemptReflector(h, f.Protocol, f.Keys)
	return ok
}

func isExemptPref(p int) bool { return p == ExemptIPv4Pref || p == ExemptIPv6Pref }

// exemptions plans the probe exemptions on one hook of the interface.
// cake says which shaper the egress ones go through (prio's bypass band
// or htb's direct queue); rebuilt means the root qdisc (and every filter
// on it) is recreated by this plan.
func (d *differ) exemptions(l shape.Link, dev *DeviceState, h hook, cake, rebuilt bool) {
	var liveFilters []Filter
	switch {
	case h == egressHook && !rebuilt && dev.ownsRoot():
		liveFilters = dev.RootFilters
	case h == ingressHook:
		liveFilters = dev.IngressFilters
	}
	have := map[int][]shape.Reflector{}
	for _, f := range liveFilters {
		if f.Header || !isExemptPref(f.Pref) {
			continue
		}
		if !isOurExemption(f, h, cake) {
			d.warn(l.Name, fmt.Sprintf("%s %s has a filter at pref %d that macake did not write; probe exemptions there are left alone, so the controller may see macake's own queue. Remove it: tc filter del dev %s %s pref %d",
				dev.Name, h, f.Pref, dev.Name, hookSelector(h), f.Pref))
			return
		}
		r, _ := exemptReflector(h, f.Protocol, f.Keys)
		have[f.Pref] = append(have[f.Pref], r)
	}
	want := map[int][]shape.Reflector{}
	for _, r := range shape.SortedReflectors(l.Reflectors) {
		pref, _ := exemptPref(r.Addr)
		want[pref] = append(want[pref], r)
	}
	d.claimed["exempt-"+h.String()+"/"+dev.Name] = true
	op := plan.Op{Link: l.Name, Interface: l.Interface, Kind: "exemptions", Role: plan.RoleRules, ID: dev.Name + "/" + h.String(),
		Label: fmt.Sprintf("probe exemptions on %s %s %s", dev.Name, h, pipeLabel(l, hookDirection(h)))}
	var cmds []execrun.Command
	for _, pref := range []int{ExemptIPv4Pref, ExemptIPv6Pref} {
		hv, wv := sortedReflectors(have[pref]), want[pref]
		if slices.Equal(hv, wv) {
			continue
		}
		if len(hv) > 0 {
			cmds = append(cmds, d.t.deletePref(dev.Name, h, pref, protoOf(pref)))
		}
		for _, r := range wv {
			cmds = append(cmds, d.t.addExemption(dev.Name, h, cake, r))
		}
	}
	if len(cmds) == 0 {
		return
	}
	before := reflectorList(append(sortedReflectors(have[ExemptIPv4Pref]), sortedReflectors(have[ExemptIPv6Pref])...))
	after := reflectorList(append(want[ExemptIPv4Pref], want[ExemptIPv6Pref]...))
	f := plan.Field{Name: "reflectors", Key: "reflectors", Before: strings.Join(before, ", "), After: strings.Join(after, ", ")}
	if len(before) > 0 {
		f.BeforeValue = before
	}
	if len(after) > 0 {
		f.AfterValue = after
	}
	switch {
	case len(before) == 0:
		op.Action = plan.Create
	case len(after) == 0:
		op.Action, op.Reason = plan.Remove, "no reflectors to exempt"
	default:
		op.Action, op.Reason = plan.Update, "reflectors differ"
	}
	op.Fields, op.Commands = []plan.Field{f}, cmds
	d.add(op)
}

func hookDirection(h hook) shape.Direction {
	if h == egressHook {
		return shape.Upload
	}
	return shape.Download
}

func hookSelector(h hook) string {
	if h == egressHook {
		return "parent " + rootHandleArg
	}
	return "ingress"
}

func protoOf(pref int) string {
	if pref == ExemptIPv4Pref {
		return "ip"
	}
	return "ipv6"
}

// sortedReflectors sorts live exemptions without merging duplicates: two
// copies of one filter differ from the one macake wants.
func sortedReflectors(in []shape.Reflector) []shape.Reflector {
	out := slices.Clone(in)
	slices.SortFunc(out, shape.CompareReflectors)
	return out
}

func reflectorList(in []shape.Reflector) []string {
	out := make([]string, len(in))
	for i, r := range in {
		out[i] = r.String()
	}
	return out
}

// redirect plans the ingress filter that sends everything to the IFB.
func (d *differ) redirect(l shape.Link, dev *DeviceState, ifb string) {
	var ours []Filter
	ahead := map[string]bool{}
	for _, f := range dev.IngressFilters {
		switch {
		case f.Header || isExemptPref(f.Pref):
		case f.Pref == RedirectPref && isOurRedirect(f):
			ours = append(ours, f)
		case f.Pref == RedirectPref:
			d.unshaped(l.Name, fmt.Sprintf("%s's ingress hook has a filter at pref %d that macake did not write, so download is not shaped. Remove it: tc filter del dev %s ingress pref %d",
				dev.Name, RedirectPref, dev.Name, RedirectPref), shape.Download)
			return
		case f.Pref < RedirectPref:
			ahead[fmt.Sprintf("pref %d %s", f.Pref, f.Kind)] = true
		}
	}
	if len(ahead) > 0 {
		list := make([]string, 0, len(ahead))
		for k := range ahead {
			list = append(list, k)
		}
		sort.Strings(list)
		d.warn(l.Name, fmt.Sprintf("%s's ingress hook has other filters that run before macake's redirect (%s); packets they match are not shaped on download", dev.Name, strings.Join(list, ", ")))
	}
	d.claimed["redirect/"+dev.Name] = true
	if len(ours) == 1 {
		f, a := ours[0], ours[0].Actions[0]
		if a.ToDev == ifb && a.Direction == "egress" && f.Protocol == "all" && sameKeys(f.Keys, []U32Key{{}}) {
			return
		}
	}
	op := plan.Op{Link: l.Name, Interface: l.Interface, Kind: "redirect", Role: plan.RoleRules, ID: dev.Name,
		Label: fmt.Sprintf("redirect %s ingress → %s %s", dev.Name, ifb, pipeLabel(l, shape.Download))}
	target := plan.Field{Name: "target", Key: "redirect_to", After: ifb, AfterValue: ifb}
	if len(ours) == 0 {
		op.Action, op.Commands = plan.Create, []execrun.Command{d.t.addRedirect(dev.Name, ifb)}
	} else {
		target.Before, target.BeforeValue = ours[0].Actions[0].ToDev, ours[0].Actions[0].ToDev
		op.Action, op.Reason = plan.Update, "target differs"
		op.Commands = []execrun.Command{d.t.deleteRedirect(dev.Name), d.t.addRedirect(dev.Name, ifb)}
	}
	op.Fields = []plan.Field{target}
	d.add(op)
}

const removedReason = "no longer in the desired state"

// unshapedOnDevice names the unshaped link whose leftovers are on device n
// (its interface, or its IFB) and says why it is not shaped, when the
// desired state tells. On an interface several unshaped policies may
// name, the one whose IFB the live redirect feeds is the one that was
// shaped.
func (d *differ) unshapedOnDevice(n string) (link, reason string) {
	if slot, ours := IFBSlot(n); ours {
		if u, ok := d.desired.UnshapedSlot(slot); ok {
			return u.Name, u.Reason
		}
		return "", removedReason
	}
	fed := -1
	if dev := d.live.Devices[n]; dev != nil {
		for _, f := range dev.IngressFilters {
			if isOurRedirect(f) {
				fed, _ = IFBSlot(f.Actions[0].ToDev)
			}
		}
	}
	var found *shape.Unshaped
	for i, u := range d.desired.Unshaped {
		if u.Interface != n {
			continue
		}
		if _, shaped := d.desired.Link(u.Name); shaped {
			continue
		}
		if found == nil || u.Slot == fed {
			found = &d.desired.Unshaped[i]
		}
	}
	if found == nil {
		return "", removedReason
	}
	return found.Name, found.Reason
}

// removals plans the removal of every owned object nothing claimed.
func (d *differ) removals() {
	names := make([]string, 0, len(d.live.Devices))
	for n := range d.live.Devices {
		names = append(names, n)
	}
	sort.Strings(names)
	removedIFB := map[string]bool{}

	// 1. Ingress filters, so no packet is redirected to a device about to go.
	for _, n := range names {
		dev := d.live.Devices[n]
		hookQ := dev.Hook()
		if hookQ == nil {
			continue
		}
		var redirect bool
		exempt := map[int]bool{}
		foreign := 0
		for _, f := range dev.IngressFilters {
			switch {
			case f.Header:
			case isOurRedirect(f):
				redirect = true
			case isOurExemption(f, ingressHook, false):
				exempt[f.Pref] = true
			default:
				foreign++
			}
		}
		dropRedirect := redirect && !d.claimed["redirect/"+n]
		dropExempt := len(exempt) > 0 && !d.claimed["exempt-ingress/"+n]
		if !dropRedirect && !dropExempt {
			continue
		}
		keepsOurs := (redirect && !dropRedirect) || (len(exempt) > 0 && !dropExempt)
		link, reason := d.unshapedOnDevice(n)
		if l, ok := d.off["ingress/"+n]; ok {
			link, reason = l, shape.DirectionOff(shape.Download)
		}
		if hookQ.Kind == "ingress" && d.live.OwnedHooks[n] && foreign == 0 && !keepsOurs && !d.claimed["hook/"+n] {
			// macake added it and only macake's filters use it: deleting
			// the qdisc removes them all in one step. One that was there
			// first stays, with macake's filters taken off it.
			why := "it holds only macake's filters, which are " + removedReason
			if link != "" {
				why = reason
			}
			d.add(plan.Op{Link: link, Interface: n, Kind: KindIngress, Role: plan.RoleRules, ID: n, Action: plan.Remove,
				Label:    "ingress qdisc on " + n,
				Reason:   why,
				Commands: []execrun.Command{d.t.tcCmd("qdisc", "del", "dev", n, "handle", "ffff:", "ingress")},
			})
			continue
		}
		if dropRedirect {
			d.add(plan.Op{Link: link, Interface: n, Kind: "redirect", Role: plan.RoleRules, ID: n, Action: plan.Remove,
				Label: "redirect " + n + " ingress", Reason: reason,
				Commands: []execrun.Command{d.t.deleteRedirect(n)},
			})
		}
		if dropExempt {
			op := plan.Op{Link: link, Interface: n, Kind: "exemptions", Role: plan.RoleRules, ID: n + "/ingress", Action: plan.Remove,
				Label: "probe exemptions on " + n + " ingress", Reason: reason}
			for _, pref := range []int{ExemptIPv4Pref, ExemptIPv6Pref} {
				if exempt[pref] {
					op.Commands = append(op.Commands, d.t.deletePref(n, ingressHook, pref, protoOf(pref)))
				}
			}
			d.add(op)
		}
	}
	// 2. IFB devices; their qdiscs go with them.
	for _, n := range names {
		dev := d.live.Devices[n]
		slot, ours := IFBSlot(n)
		if !ours || dev.Kind != "ifb" || d.claimed["ifb/"+n] {
			continue
		}
		removedIFB[n] = true
		why := fmt.Sprintf("no active link has slot %d", slot)
		link, reason := d.unshapedOnDevice(n)
		if link != "" {
			why = reason
		}
		if l, ok := d.off["ifb/"+n]; ok {
			link, why = l, shape.DirectionOff(shape.Download)
		}
		d.add(plan.Op{Link: link, Interface: n, Kind: "ifb", ID: n, Action: plan.Remove,
			Label:    "ifb " + n,
			Reason:   why,
			Commands: []execrun.Command{d.t.ipCmd("link", "del", "dev", n)},
		})
	}
	// 3. Root qdiscs; the kernel puts its default back, and the egress
	// exemptions go with them.
	for _, n := range names {
		dev := d.live.Devices[n]
		if !dev.ownsRoot() || d.claimed["root/"+n] || removedIFB[n] {
			continue
		}
		link, reason := d.unshapedOnDevice(n)
		if l, ok := d.off["root/"+n]; ok {
			link, reason = l, shape.DirectionOff(shape.Upload)
		}
		d.add(plan.Op{Link: link, Interface: n, Kind: KindShaper, ID: n, Action: plan.Remove,
			Label:    "shaper on " + n,
			Fields:   []plan.Field{{Name: "qdisc", Key: "qdisc", Before: liveKind(dev), BeforeValue: liveKind(dev)}},
			Reason:   reason,
			Commands: []execrun.Command{d.t.deleteRoot(n)},
		})
	}
	// 4. Ownership records of interfaces no link shapes any more where
	// macake's root is not live (someone replaced it, or the interface is
	// gone): nothing runs, the record goes, and whatever qdisc is there
	// stays. Without this, shaping the interface again one day would
	// replace a qdisc someone put there after macake let go.
	for _, n := range slices.Sorted(maps.Keys(d.live.OwnedRoots)) {
		dev := d.live.Devices[n]
		if d.wanted[n] || dev.ownsRoot() {
			continue
		}
		if _, ifb := IFBSlot(n); ifb {
			continue
		}
		op := plan.Op{Interface: n, Kind: KindShaper, ID: n, Action: plan.Remove,
			Label:    "shaper on " + n,
			Commands: []execrun.Command{},
		}
		if root := dev.Root(); root != nil && root.Handle != 0 {
			op.Reason = fmt.Sprintf("%s is no longer shaped and its root qdisc was replaced by someone else (%s %s); macake forgets it and leaves that qdisc alone",
				n, root.Kind, FormatHandle(root.Handle))
		} else if dev == nil {
			op.Reason = fmt.Sprintf("%s is gone and no longer shaped; macake forgets its root qdisc there", n)
		} else {
			op.Reason = fmt.Sprintf("%s is no longer shaped and macake's root qdisc is already gone; macake forgets it", n)
		}
		d.add(op)
	}
}

// joinAnd joins a list as English: "a", "a and b", "a, b and c".
func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
