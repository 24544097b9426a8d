// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

// shaperSpec is the desired shaper of one direction, in tc terms.
type shaperSpec struct {
	dev  string
	dir  shape.Direction
	cake bool // else htb + bfifo
	pipe shape.Pipe
	// overhead and mpu are per-packet compensation in bytes (htb and cake).
	overhead, mpu int
	// CAKE only.
	diffserv, flowmode  string
	nat, ackFilter, ing bool
	wash, splitGSO      bool
	// rttMicros is CAKE's rtt (interval) in µs; memlimit its queue memory
	// in bytes (0: CAKE's own); linkLayer "atm", "ptm" or "noatm".
	rttMicros uint32
	memlimit  int64
	linkLayer string
}

// layout names how the shaper is built (see rootLayout).
func (s shaperSpec) layout() string { return pick(s.cake, "prio+cake", "htb+bfifo") }

func (s shaperSpec) kindName() string {
	if s.cake {
		return "cake"
	}
	return "htb+bfifo"
}

// Defaults CAKE applies when an option is not given. macake names every
// option it manages in each command, so that `tc qdisc change` fully
// specifies the qdisc (a change keeps whatever it does not name); the
// three tc cannot name (see cakeNeedsRebuild) are the exceptions.
const (
	cakeDefaultDiffserv  = "diffserv3"
	cakeDefaultFlowMode  = "triple-isolate"
	cakeDefaultRTTMicros = 100_000
	cakeDefaultLinkLayer = "noatm"
)

// specFor returns the desired shaper of one direction of l.
func specFor(l shape.Link, dir shape.Direction, cake bool) shaperSpec {
	s := shaperSpec{dir: dir, cake: cake, pipe: l.Pipe(dir), dev: l.Interface}
	if dir == shape.Download {
		s.dev = IFBName(l.Slot)
	}
	c := l.Cake
	if c == nil {
		c = &shape.Cake{}
	}
	s.overhead, s.mpu = c.Overhead, c.MPU
	if !cake {
		return s
	}
	s.diffserv = c.Diffserv
	if s.diffserv == "" {
		s.diffserv = cakeDefaultDiffserv
	}
	s.flowmode = c.EgressIsolate
	if dir == shape.Download {
		s.flowmode = c.IngressIsolate
	}
	if s.flowmode == "" {
		s.flowmode = cakeDefaultFlowMode
	}
	s.nat = c.NAT
	// ACK filtering thins the ACKs of download flows as they leave: it
	// belongs on the upload side only.
	s.ackFilter = c.ACKFilter && dir == shape.Upload
	s.ing = dir == shape.Download
	s.wash, s.splitGSO = c.Wash, !c.NoSplitGSO
	s.rttMicros = cakeDefaultRTTMicros
	if c.RTT > 0 {
		s.rttMicros = uint32(c.RTT / time.Microsecond)
	}
	s.memlimit = c.MemLimit
	s.linkLayer = cakeLinkLayer(c.LinkLayer)
	return s
}

var (
	rootHandleArg   = FormatHandle(RootHandle)
	classHandleArg  = FormatHandle(ClassHandle)
	leafHandleArg   = FormatHandle(LeafHandle)
	bypassClassArg  = FormatHandle(BypassClass)
	cakeParentArg   = FormatHandle(CakeClass)
	prioBandsArg    = strconv.Itoa(prioBands)
	prioPriomapArgs = strings.Fields(strings.Repeat(strconv.Itoa(prioShapedBand)+" ", 16))
)

// leafParent is the class the shaper's leaf qdisc hangs from: the htb
// class, or prio's shaped band.
func (s shaperSpec) leafParent() string {
	if s.cake {
		return cakeParentArg
	}
	return classHandleArg
}

// cakeOption is one option of CAKE's command line, with the policy key it
// comes from, as config names keys ("cake.wash"; "" for the direction,
// which no key sets): a refusal names the key to change.
type cakeOption struct {
	key  string
	args []string
}

// cakeOptions renders every CAKE option macake manages, in tc's words,
// each with its policy key. Their order matters to tc in one place: raw
// resets the link layer, so the link layer comes after the overhead.
func cakeOptions(s shaperSpec) []cakeOption {
	opts := []cakeOption{
		{"shaper." + s.dir.String(), []string{"bandwidth", rateArg(s.pipe.RateBits)}},
		{"cake.diffserv", []string{s.diffserv}},
		{isolationKey(s.dir), []string{s.flowmode}},
		{"cake.nat", []string{pick(s.nat, "nat", "nonat")}},
		{"cake.wash", []string{pick(s.wash, "wash", "nowash")}},
		{"cake.split_gso", []string{pick(s.splitGSO, "split-gso", "no-split-gso")}},
		{"cake.ack_filter", []string{pick(s.ackFilter, "ack-filter", "no-ack-filter")}},
		{"cake.rtt", []string{"rtt", formatMicros(s.rttMicros)}},
	}
	if s.memlimit > 0 {
		opts = append(opts, cakeOption{"cake.memlimit", []string{"memlimit", strconv.FormatInt(s.memlimit, 10)}})
	}
	switch {
	case s.overhead == 0 && s.mpu == 0:
		opts = append(opts, cakeOption{"shaper.overhead", []string{"raw"}})
	case s.mpu == 0:
		opts = append(opts, cakeOption{"shaper.overhead", []string{"overhead", strconv.Itoa(s.overhead)}})
	default:
		opts = append(opts, cakeOption{"shaper.overhead", []string{"overhead", strconv.Itoa(s.overhead)}},
			cakeOption{"shaper.mpu", []string{"mpu", strconv.Itoa(s.mpu)}})
	}
	return append(opts,
		cakeOption{"cake.link_layer", []string{s.linkLayer}},
		cakeOption{"", []string{pick(s.ing, "ingress", "egress")}})
}

func isolationKey(dir shape.Direction) string {
	if dir == shape.Download {
		return "cake.ingress_isolation"
	}
	return "cake.egress_isolation"
}

// cakeArgs renders every CAKE option macake manages, after "cake".
func cakeArgs(s shaperSpec) []string {
	a := []string{"cake"}
	for _, o := range cakeOptions(s) {
		a = append(a, o.args...)
	}
	return a
}

// formatMicros writes a time in µs the way tc reads it, in whole
// milliseconds where it can.
func formatMicros(us uint32) string {
	if us%1000 == 0 {
		return strconv.FormatUint(uint64(us/1000), 10) + "ms"
	}
	return strconv.FormatUint(uint64(us), 10) + "us"
}

func pick(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

// htbClassArgs renders the htb class: rate = ceil, a 1 ms bucket, and the
// per-packet overhead compensation.
func htbClassArgs(verb string, s shaperSpec) []string {
	burst := strconv.FormatInt(htbBurst(s.pipe.RateBits), 10)
	a := []string{"class", verb, "dev", s.dev, "parent", rootHandleArg, "classid", classHandleArg,
		"htb", "rate", rateArg(s.pipe.RateBits), "ceil", rateArg(s.pipe.RateBits),
		"burst", burst, "cburst", burst, "quantum", strconv.Itoa(htbQuantum)}
	if s.overhead != 0 {
		a = append(a, "overhead", strconv.Itoa(s.overhead))
	}
	if s.mpu != 0 {
		a = append(a, "mpu", strconv.Itoa(s.mpu))
	}
	return a
}

// leafArgs renders the leaf qdisc: the bfifo under the htb class, or CAKE
// under prio's shaped band.
func leafArgs(verb string, s shaperSpec) []string {
	a := []string{"qdisc", verb, "dev", s.dev, "parent", s.leafParent(), "handle", leafHandleArg}
	if s.cake {
		return append(a, cakeArgs(s)...)
	}
	return append(a, "bfifo", "limit", strconv.FormatInt(s.pipe.QueueBytes, 10))
}

// deleteLeaf removes the leaf qdisc under parent (prio puts a default
// pfifo back, htb a pfifo too).
func (t Tools) deleteLeaf(dev, parent string) execrun.Command {
	return t.tcCmd("qdisc", "del", "dev", dev, "parent", parent, "handle", leafHandleArg)
}

// rootArgs renders the root qdisc itself; rootVerb is "add" over a kernel
// default (so a foreign root that appeared meanwhile is never replaced) or
// "replace" on macake's own IFB. htb sends what no class takes, and the
// exempt probes (to 4d4b: itself), straight out through its direct
// queue; prio serves band 0 (the exempt probes, class 4d4b:1) strictly
// ahead of band 1, where CAKE shapes everything else: CAKE itself cannot
// let a packet bypass its shaper.
func rootArgs(rootVerb string, s shaperSpec) []string {
	a := []string{"qdisc", rootVerb, "dev", s.dev, "root", "handle", rootHandleArg}
	if s.cake {
		return append(append(a, "prio", "bands", prioBandsArg, "priomap"), prioPriomapArgs...)
	}
	return append(a, "htb", "default", "1")
}

// createShaper renders a whole shaper from nothing.
func (t Tools) createShaper(rootVerb string, s shaperSpec) []execrun.Command {
	cmds := []execrun.Command{t.tcCmd(rootArgs(rootVerb, s)...)}
	if !s.cake {
		cmds = append(cmds, t.tcCmd(htbClassArgs("replace", s)...))
	}
	return append(cmds, t.tcCmd(leafArgs("replace", s)...))
}

func (t Tools) deleteRoot(dev string) execrun.Command {
	// Naming the handle makes the kernel refuse ("Invalid handle") if the
	// root is no longer macake's.
	return t.tcCmd("qdisc", "del", "dev", dev, "root", "handle", rootHandleArg)
}

// setRateCommand is the controller's hot path: one child process. For htb
// the class rate and the bfifo limit go together through `tc -batch -`,
// because DESIGN §2 resizes the queue with every rate change; for CAKE it
// is one change of the leaf.
func (t Tools) setRateCommand(s shaperSpec) execrun.Command {
	if s.cake {
		return t.tcCmd(leafArgs("change", s)...)
	}
	cmd := t.tcCmd("-batch", "-")
	cmd.Stdin = strings.Join(htbClassArgs("change", s), " ") + "\n" + strings.Join(leafArgs("change", s), " ") + "\n"
	return cmd
}

// exemption direction: egress probes go to a reflector, ingress replies
// come from one.
type hook int

const (
	egressHook hook = iota
	ingressHook
)

func (h hook) String() string {
	if h == egressHook {
		return "egress"
	}
	return "ingress"
}

// exemptPref returns the filter priority and protocol for an address.
func exemptPref(a netip.Addr) (int, string) {
	if a.Is4() {
		return ExemptIPv4Pref, "ip"
	}
	return ExemptIPv6Pref, "ipv6"
}

// exemptFlowID is the class an exempt packet is sent to: on egress under
// htb its root itself (4d4b:), which htb sends straight out unshaped (its
// "direct" queue), and under prio its band 0 (4d4b:1), which prio serves
// ahead of CAKE's band; on ingress any classid, which ends classification
// with "OK" so the packet goes up the stack without reaching the redirect.
func exemptFlowID(h hook, cake bool) string {
	switch {
	case h == ingressHook:
		return "ffff:1"
	case cake:
		return bypassClassArg
	}
	return rootHandleArg
}

func (t Tools) hookArgs(verb, dev string, h hook) []string {
	if h == egressHook {
		return []string{"filter", verb, "dev", dev, "parent", rootHandleArg}
	}
	return []string{"filter", verb, "dev", dev, "ingress"}
}

func (t Tools) addExemption(dev string, h hook, cake bool, r shape.Reflector) execrun.Command {
	a := r.Addr
	pref, proto := exemptPref(a)
	side := "dst"
	if h == ingressHook {
		side = "src"
	}
	args := append(t.hookArgs("add", dev, h), "protocol", proto, "pref", strconv.Itoa(pref), "u32")
	family, bits := "ip", "/32"
	if !a.Is4() {
		family, bits = "ip6", "/128"
	}
	args = append(args, "match", family, "protocol", strconv.Itoa(int(ipProtocol(r))), "0xff", "match", family, side, a.String()+bits)
	if r.Kind.HasPort() {
		// The reflector's port is the destination of the probes and
		// the source of the replies. u32's port matches assume an IPv4
		// header without options and an IPv6 header without extension
		// headers, which is what probes and their replies carry.
		args = append(args, "match", family, side[:1]+"port", strconv.Itoa(int(r.Port)), "0xffff")
	}
	return t.tcCmd(append(args, "flowid", exemptFlowID(h, cake))...)
}

// ipProtocol is the IP protocol (IPv6 next header) of a reflector's probes.
func ipProtocol(r shape.Reflector) uint8 {
	switch {
	case r.Kind == shape.ProbeTCP:
		return 6
	case r.Kind == shape.ProbeUDP:
		return 17
	case r.Addr.Is4():
		return 1
	}
	return 58
}

func (t Tools) deletePref(dev string, h hook, pref int, proto string) execrun.Command {
	return t.tcCmd(append(t.hookArgs("del", dev, h), "protocol", proto, "pref", strconv.Itoa(pref), "u32")...)
}

// exemptKeys returns the u32 keys tc shows for an exemption of r: the
// protocol, the address and, for TCP and UDP, the port, each as the
// 32-bit word of the header it sits in with a mask.
func exemptKeys(h hook, r shape.Reflector) []U32Key {
	a := r.Addr
	b := a.AsSlice()
	word := func(i int) uint32 {
		return uint32(b[i])<<24 | uint32(b[i+1])<<16 | uint32(b[i+2])<<8 | uint32(b[i+3])
	}
	proto := uint32(ipProtocol(r))
	// The ports share one word: the source port in its high half, the
	// destination port in its low half.
	portKey := func(off int) U32Key {
		if h == ingressHook {
			return U32Key{Off: off, Value: uint32(r.Port) << 16, Mask: 0xffff0000}
		}
		return U32Key{Off: off, Value: uint32(r.Port), Mask: 0x0000ffff}
	}
	if a.Is4() {
		off := 16
		if h == ingressHook {
			off = 12
		}
		keys := []U32Key{{Off: 8, Value: proto << 16, Mask: 0x00ff0000}, {Off: off, Value: word(0), Mask: 0xffffffff}}
		if r.Kind.HasPort() {
			keys = append(keys, portKey(20))
		}
		return keys
	}
	base := 24
	if h == ingressHook {
		base = 8
	}
	keys := []U32Key{{Off: 4, Value: proto << 8, Mask: 0x0000ff00}}
	for i := 0; i < 4; i++ {
		keys = append(keys, U32Key{Off: base + 4*i, Value: word(4 * i), Mask: 0xffffffff})
	}
	if r.Kind.HasPort() {
		keys = append(keys, portKey(40))
	}
	return keys
}

// exemptReflector reads the reflector back from an exemption's keys; ok
// is false when the keys are not an exemption macake would write.
func exemptReflector(h hook, proto string, keys []U32Key) (shape.Reflector, bool) {
	var r shape.Reflector
	var protoOff, portOff int
	var protoShift uint
	switch proto {
	case "ip":
		protoOff, protoShift, portOff = 8, 16, 20
	case "ipv6":
		protoOff, protoShift, portOff = 4, 8, 40
	default:
		return r, false
	}
	var b [16]byte
	base := 24 // IPv6 destination; the source is at 8
	if h == ingressHook {
		base = 8
	}
	for _, k := range keys {
		switch {
		case k.Off == protoOff && k.Mask == 0xff<<protoShift:
			switch k.Value >> protoShift {
			case 6:
				r.Kind = shape.ProbeTCP
			case 17:
				r.Kind = shape.ProbeUDP
			}
		case k.Off == portOff && (k.Mask == 0xffff || k.Mask == 0xffff0000):
			r.Port = uint16(k.Value | k.Value>>16)
		case k.Mask == 0xffffffff && proto == "ip":
			v := k.Value
			r.Addr = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		case k.Mask == 0xffffffff && k.Off >= base && k.Off < base+16:
			i := k.Off - base
			b[i], b[i+1], b[i+2], b[i+3] = byte(k.Value>>24), byte(k.Value>>16), byte(k.Value>>8), byte(k.Value)
			r.Addr = netip.AddrFrom16(b)
		}
	}
	if !r.Addr.IsValid() || r.Kind.HasPort() != (r.Port != 0) || !sameKeys(keys, exemptKeys(h, r)) {
		return shape.Reflector{}, false
	}
	return r, true
}

func sameKeys(a, b []U32Key) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[U32Key]int{}
	for _, k := range a {
		seen[k]++
	}
	for _, k := range b {
		if seen[k] == 0 {
			return false
		}
		seen[k]--
	}
	return true
}

func (t Tools) addRedirect(dev, ifb string) execrun.Command {
	return t.tcCmd("filter", "add", "dev", dev, "ingress", "protocol", "all", "pref", strconv.Itoa(RedirectPref),
		"u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", ifb)
}

func (t Tools) deleteRedirect(dev string) execrun.Command {
	return t.tcCmd("filter", "del", "dev", dev, "ingress", "protocol", "all", "pref", strconv.Itoa(RedirectPref), "u32")
}
