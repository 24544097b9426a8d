// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/config/units"
	"github.com/macake/macake/internal/suggest"
	"github.com/macake/macake/shape"
)

// Overhead is the [shaper] overhead key: the bytes of framing the link
// adds to every packet, given as a number or as one of CAKE's framing
// keywords (Framings), which stands for its bytes, its minimum packet
// size and its link layer. Bytes is what the file means either way.
type Overhead struct {
	Bytes int
	// Keyword is the framing keyword given, "" for a number.
	Keyword string
}

// Framing is what one of CAKE's framing keywords stands for (tc-cake(8);
// the numbers are iproute2's).
type Framing struct {
	Overhead, MPU int
	// LinkLayer is the cell framing: "atm", "ptm" or "none".
	LinkLayer LinkLayer
}

// Framings are CAKE's framing keywords that [shaper] overhead accepts.
var Framings = map[string]Framing{
	"docsis":          {Overhead: 18, MPU: 64, LinkLayer: LinkLayerNone},
	"ethernet":        {Overhead: 38, MPU: 84, LinkLayer: LinkLayerNone},
	"pppoe-ptm":       {Overhead: 30, LinkLayer: LinkLayerPTM},
	"bridged-ptm":     {Overhead: 22, LinkLayer: LinkLayerPTM},
	"pppoe-vcmux":     {Overhead: 32, LinkLayer: LinkLayerATM},
	"pppoe-llcsnap":   {Overhead: 40, LinkLayer: LinkLayerATM},
	"pppoa-vcmux":     {Overhead: 10, LinkLayer: LinkLayerATM},
	"pppoa-llc":       {Overhead: 14, LinkLayer: LinkLayerATM},
	"bridged-vcmux":   {Overhead: 24, LinkLayer: LinkLayerATM},
	"bridged-llcsnap": {Overhead: 32, LinkLayer: LinkLayerATM},
	"ipoa-vcmux":      {Overhead: 8, LinkLayer: LinkLayerATM},
	"ipoa-llcsnap":    {Overhead: 16, LinkLayer: LinkLayerATM},
	"conservative":    {Overhead: 48, LinkLayer: LinkLayerATM},
}

// FramingNames lists the keywords of Framings, sorted.
func FramingNames() []string {
	names := make([]string, 0, len(Framings))
	for k := range Framings {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// UnmarshalText implements encoding.TextUnmarshaler: a whole number of
// bytes (its range is checked with the policy) or a framing keyword.
func (o *Overhead) UnmarshalText(b []byte) error {
	s := string(b)
	if n, err := strconv.Atoi(s); err == nil {
		*o = Overhead{Bytes: n}
		return nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return fmt.Errorf("must be a whole number, not %s", s)
	}
	if f, ok := Framings[s]; ok {
		*o = Overhead{Bytes: f.Overhead, Keyword: s}
		return nil
	}
	names := FramingNames()
	msg := fmt.Sprintf("%q is neither a number of bytes (0-%d) nor one of CAKE's framing keywords: %s", s, maxOverhead, strings.Join(names, ", "))
	if sug := suggest.Closest(s, names); sug != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", sug)
	}
	return fmt.Errorf("%s", msg)
}

// MarshalText implements encoding.TextMarshaler: the keyword, or the
// number.
func (o Overhead) MarshalText() ([]byte, error) {
	if o.Keyword != "" {
		return []byte(o.Keyword), nil
	}
	return []byte(strconv.Itoa(o.Bytes)), nil
}

// LinkLayer is the cell framing CAKE compensates ([cake] link_layer).
type LinkLayer string

// The link layers. LinkLayerNone (CAKE's noatm) is the default.
const (
	LinkLayerNone LinkLayer = "none"
	LinkLayerATM  LinkLayer = "atm"
	LinkLayerPTM  LinkLayer = "ptm"
)

// LinkLayers lists every LinkLayer.
var LinkLayers = []LinkLayer{LinkLayerNone, LinkLayerATM, LinkLayerPTM}

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *LinkLayer) UnmarshalText(b []byte) error { return ParseEnum("link layer", b, LinkLayers, l) }

// Limits of the [cake] values.
const (
	minCakeRTT      = units.Duration(100 * time.Microsecond) // CAKE's "datacentre"
	maxCakeRTT      = units.Duration(10 * time.Second)
	minCakeMemLimit = 64 * units.Kilobyte   // a few packets' worth of kernel memory
	maxCakeMemLimit = units.Size(1<<32 - 1) // the kernel's 32-bit field
)

func (d *decoder) checkCake(p *Policy, target Target) {
	c := &p.Cake
	if d.given("cake.rtt") && (c.RTT < minCakeRTT || c.RTT > maxCakeRTT) {
		d.bad("cake.rtt", "%s is outside %s..%s", c.RTT, minCakeRTT, maxCakeRTT)
	}
	if d.given("cake.memlimit") && (c.MemLimit < minCakeMemLimit || c.MemLimit > maxCakeMemLimit) {
		d.bad("cake.memlimit", "%s is outside %s..%s", c.MemLimit, minCakeMemLimit, maxCakeMemLimit)
	}
	if target != TargetDarwin {
		return
	}
	var keys []string
	if e := d.lookup("cake"); e != nil {
		for _, c := range e.children {
			keys = append(keys, "cake."+c.name())
		}
	}
	if len(keys) > 0 {
		d.warnAt("cake", "%s: macOS dummynet cannot do CAKE's options; they apply only on Linux with sch_cake", strings.Join(keys, ", "))
	}
	if o := p.Shaper.Overhead; o.Keyword != "" && Framings[o.Keyword].LinkLayer != LinkLayerNone && !d.given("cake.link_layer") {
		d.warnAt("shaper.overhead", "%q frames packets in %s cells, which dummynet cannot count: macOS compensates its %d bytes of overhead only", o.Keyword, strings.ToUpper(string(Framings[o.Keyword].LinkLayer)), o.Bytes)
	}
}

// resolveFraming fills in what a framing keyword given as [shaper]
// overhead stands for, where the file does not say otherwise: mpu and
// [cake] link_layer.
func (d *decoder) resolveFraming(p *Policy) {
	o := p.Shaper.Overhead
	if o.Keyword == "" {
		return
	}
	f := Framings[o.Keyword]
	if !d.given("shaper.mpu") {
		p.Shaper.MPU = f.MPU
	}
	if !d.given("cake.link_layer") {
		p.Cake.LinkLayer = f.LinkLayer
	}
}

// ShapeCake returns the link's CAKE options and per-packet compensation
// as backends take them (nil when the policy sets none of them): the
// [cake] table, with [shaper] overhead and mpu, which htb and CAKE apply
// in the kernel.
func (l Link) ShapeCake() *shape.Cake {
	c := l.Cake
	if c.IsZero() && l.Shaper.Overhead.Bytes == 0 && l.Shaper.MPU == 0 {
		return nil
	}
	sc := &shape.Cake{
		Diffserv:       string(c.Diffserv),
		EgressIsolate:  string(c.EgressIsolation),
		IngressIsolate: string(c.IngressIsolation),
		NAT:            c.NAT,
		ACKFilter:      c.ACKFilter,
		Wash:           c.Wash,
		NoSplitGSO:     !c.SplitGSO,
		RTT:            c.RTT.Std(),
		MemLimit:       int64(c.MemLimit),
		Overhead:       l.Shaper.Overhead.Bytes,
		MPU:            l.Shaper.MPU,
	}
	if c.LinkLayer != LinkLayerNone {
		sc.LinkLayer = string(c.LinkLayer)
	}
	return sc
}

// CakeCheck tries CAKE options on the running system (see
// LoadOptions.CheckCake).
type CakeCheck func(*shape.Cake) []CakeRefusal

// CakeRefusal is one CAKE option the system refuses: the policy key that
// asks for it ("cake.wash", "" for their combination) and what to do.
type CakeRefusal struct {
	Key, Message string
}

// checkCakeOnSystem reports, at their keys, the CAKE options of l that
// check says the running system refuses.
func (d *decoder) checkCakeOnSystem(l Link, check CakeCheck) {
	c := l.ShapeCake()
	if c == nil {
		c = &shape.Cake{}
	}
	for _, r := range check(c) {
		key := r.Key
		if key == "" || !d.given(key) {
			// A default the file does not write (a keyword iproute2
			// does not know, which macake names anyway): the table.
			key = "cake"
		}
		d.bad(key, "%s", r.Message)
	}
}
