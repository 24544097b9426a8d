// SPDX-License-Identifier: Apache-2.0

package config

import (
	"cmp"
	"fmt"
	"net/netip"
	"strings"
	"time"
	"unicode"

	"github.com/macake/macake/config/tomltext"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/internal/lazyregexp"
	"github.com/macake/macake/shape"
)

var linkNameRE = lazyregexp.New(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// ValidLinkName reports whether name may name a link (a policy file's
// stem): lower-case letters, digits, - and _, starting with a letter or
// digit, at most 32 characters.
func ValidLinkName(name string) bool { return linkNameRE.MatchString(name) }

// Limits of the values a policy may hold, with the reasons in the messages
// that use them.
const (
	maxOverhead  = 256
	minQueue     = 1500 * units.Byte               // one full-size packet
	maxQueue     = units.Size(shape.MaxQueueBytes) // no shaper takes more; a backend's own limit is LoadOptions.Limits
	maxPriority  = 1000
	maxSSIDBytes = 32 // IEEE 802.11
)

// durationRange is the accepted range of one duration key.
type durationRange struct {
	key      string
	get      func(*Autorate) units.Duration
	min, max time.Duration
}

var autorateDurations = []durationRange{
	{"probe_interval", func(a *Autorate) units.Duration { return a.ProbeInterval }, 10 * time.Millisecond, 10 * time.Second},
	{"delay_threshold", func(a *Autorate) units.Duration { return a.DelayThreshold }, 1 * time.Millisecond, 1 * time.Second},
	{"full_increase_below", func(a *Autorate) units.Duration { return a.FullIncreaseBelow }, 0, 1 * time.Second},
	{"full_cut_above", func(a *Autorate) units.Duration { return a.FullCutAbove }, 1 * time.Millisecond, 2 * time.Second},
	{"cut_refractory", func(a *Autorate) units.Duration { return a.CutRefractory }, 10 * time.Millisecond, 10 * time.Second},
	{"decay_refractory", func(a *Autorate) units.Duration { return a.DecayRefractory }, 100 * time.Millisecond, time.Minute},
	{"response_deadline", func(a *Autorate) units.Duration { return a.ResponseDeadline }, 100 * time.Millisecond, time.Minute},
	{"sleep_after", func(a *Autorate) units.Duration { return a.SleepAfter }, 1 * time.Second, 24 * time.Hour},
}

// validatePolicy checks every field of a decoded policy and the fields'
// relations, and fills in what derives from other fields.
func (d *decoder) validatePolicy(p *Policy, target Target) {
	d.checkDescription(p)
	d.checkMatch(&p.Match)
	d.checkShaper(p)
	d.resolveFraming(p)
	d.checkAutorate(p)
	d.checkBalanced(p)
	d.checkCake(p, target)
}

func (d *decoder) bad(path string, format string, args ...any) {
	d.probs.add(d.file, d.posOf(path), "%s: %s", path, fmt.Sprintf(format, args...))
}

func (d *decoder) warnAt(path string, format string, args ...any) {
	d.probs.warn(d.file, d.keyPosOf(path), format, args...)
}

func (d *decoder) checkDescription(p *Policy) {
	if strings.IndexFunc(p.Description, unicode.IsControl) >= 0 {
		d.bad("description", "must be one line without control characters")
	}
	if len(p.Description) > 200 {
		d.bad("description", "is %d bytes long; keep it under 200", len(p.Description))
	}
}

func (d *decoder) checkMatch(m *MatchKeys) {
	if !d.given("match.interface") {
		// Not written "Interface", nor in a table written "[Match]": the
		// lower-case error already says what to fix.
		if d.decoded("match", "match.interface") {
			d.probs.add(d.file, d.keyPosOf("match"), `[match] needs interface, the interface this policy shapes, e.g. interface = "en0"`)
		}
	} else if err := shape.CheckInterfaceName(m.Interface); m.Interface != "" && err != nil {
		if strings.HasPrefix(m.Interface, shape.OwnIFBPrefix) {
			d.bad("match.interface", "%v", err)
		} else {
			d.bad("match.interface", "%q is not an interface name: lower-case letters, digits, _, - and ., starting with a letter, at most %d characters (en0, utun3, pdp_ip0; on Linux eth0, pppoe-wan, eth0.2)", m.Interface, shape.MaxInterfaceName)
		}
	}
	if mac := m.GatewayMAC; len(mac) == 6 {
		switch {
		case mac.String() == "00:00:00:00:00:00":
			d.bad("match.gateway_mac", "00:00:00:00:00:00 is not a real address")
		case mac[0]&1 == 1:
			d.bad("match.gateway_mac", "%s is a multicast or broadcast address, not a gateway's", mac)
		}
	}
	switch ip := m.GatewayIP; {
	case !ip.IsValid():
	case ip.Zone() != "" && ip.Zone() != m.Interface:
		d.bad("match.gateway_ip", "%q: the zone must be [match].interface (%q), or leave it out", ip, m.Interface)
	case ip.Zone() != "":
		// The gateway is on the interface anyway, and the facts carry
		// no zone: keep the address without it, so that it matches.
		m.GatewayIP = ip.WithZone("")
	case ip.IsUnspecified() || ip.IsMulticast():
		d.bad("match.gateway_ip", "%s cannot be a gateway", ip)
	}
	if len(m.SSID) > maxSSIDBytes {
		d.bad("match.ssid", "is %d bytes long; an SSID has at most %d", len(m.SSID), maxSSIDBytes)
	}
	if m.Priority < -maxPriority || m.Priority > maxPriority {
		d.bad("match.priority", "%d is outside %d..%d", m.Priority, -maxPriority, maxPriority)
	}
}

func (d *decoder) checkShaper(p *Policy) {
	s := &p.Shaper
	for _, dir := range shape.Directions {
		own := dir.String() + "_mode"
		switch {
		case !d.given("shaper." + own):
		case s.Mode == ModeBalanced:
			d.bad("shaper."+own, `mode "balanced" engages and releases both directions together; for one direction at a time leave mode out (autorate) and set %s`, own)
		case s.Mode == ModeOff && s.DirectionMode(dir) != DirOff:
			d.bad("shaper."+own, `mode "off" shapes nothing; leave mode out (autorate) to shape %s as %q`, dir, s.DirectionMode(dir))
		}
	}
	for _, dir := range []shape.Direction{shape.Download, shape.Upload} {
		if s.DirectionMode(dir) != DirFixed || d.given("shaper."+dir.String()) {
			continue
		}
		key := "shaper." + dir.String() + "_mode"
		if !d.given(key) {
			key = "shaper.mode"
		}
		d.probs.add(d.file, d.posOf(key), `%s: "fixed" needs shaper.%s, the rate to shape at, e.g. %s = "100mbit"`, key, dir, dir)
	}
	for _, dir := range shape.Directions {
		if s.Shapes(dir) || !d.given("shaper."+dir.String()) {
			continue
		}
		why := fmt.Sprintf("mode %q shapes nothing", ModeOff)
		if s.Mode != ModeOff {
			why = fmt.Sprintf("%s_mode is %q", dir, DirOff)
		}
		d.warnAt("shaper."+dir.String(), "shaper.%s is ignored: %s", dir, why)
	}
	if s.Effective() == ModeOff && d.given("shaper.queue") {
		d.warnAt("shaper.queue", "shaper.queue is ignored: mode %q shapes nothing", ModeOff)
	}
	if !s.Queue.Auto && s.Queue.Size != 0 {
		switch {
		case s.Queue.Size < minQueue:
			d.bad("shaper.queue", "%s cannot hold one full-size packet; use at least %s, or \"auto\"", s.Queue.Size, minQueue)
		case s.Queue.Size > maxQueue:
			d.bad("shaper.queue", "%s is above %s, the largest queue any shaper takes; use at most %s, or \"auto\"", s.Queue.Size, maxQueue, maxQueue)
		}
	}
	for _, k := range []struct {
		key string
		v   int
	}{{"overhead", s.Overhead.Bytes}, {"mpu", s.MPU}} {
		if k.v < 0 || k.v > maxOverhead {
			d.bad("shaper."+k.key, "%d bytes is outside 0..%d", k.v, maxOverhead)
		}
	}
}

func (d *decoder) checkAutorate(p *Policy) {
	a := &p.Autorate
	shaping := p.Shaper.Effective() == ModeAutorate || p.Shaper.Effective() == ModeBalanced
	for _, dir := range shape.Directions {
		name := dir.String()
		if p.Shaper.Steers(dir) {
			d.checkBounds(p, name, p.Shaper.Rate(dir), a.Bounds(dir))
			continue
		}
		if d.given("autorate." + name) {
			why := fmt.Sprintf("mode %q does not steer the rate", p.Shaper.Mode)
			if d.given("shaper." + name + "_mode") {
				why = fmt.Sprintf("%s_mode %q does not steer it", name, p.Shaper.DirectionMode(dir))
			}
			d.warnAt("autorate."+name, "autorate.%s is ignored: %s", name, why)
		}
	}

	d.checkReflectors(a)

	for _, r := range autorateDurations {
		v := r.get(a).Std()
		if v < r.min || v > r.max {
			d.bad("autorate."+r.key, "%s is outside %s..%s", v, r.min, r.max)
		}
	}
	thresholds := d.decoded("autorate.full_increase_below", "autorate.delay_threshold", "autorate.full_cut_above")
	if thresholds && a.FullIncreaseBelow > a.DelayThreshold {
		d.bad(firstGiven(d, "autorate.full_increase_below", "autorate.delay_threshold"), "full_increase_below (%s) must not be above delay_threshold (%s)", a.FullIncreaseBelow, a.DelayThreshold)
	}
	if thresholds && a.DelayThreshold > a.FullCutAbove {
		d.bad(firstGiven(d, "autorate.full_cut_above", "autorate.delay_threshold"), "full_cut_above (%s) must not be below delay_threshold (%s)", a.FullCutAbove, a.DelayThreshold)
	}
	if a.BufferbloatWindow < 1 || a.BufferbloatWindow > 64 {
		d.bad("autorate.bufferbloat_window", "%d samples is outside 1..64", a.BufferbloatWindow)
	} else if d.decoded("autorate.bufferbloat_window") && a.BufferbloatSamples < 1 || a.BufferbloatSamples > a.BufferbloatWindow {
		d.bad(firstGiven(d, "autorate.bufferbloat_samples", "autorate.bufferbloat_window"), "bufferbloat_samples %d is outside 1..bufferbloat_window (%d)", a.BufferbloatSamples, a.BufferbloatWindow)
	}
	if a.MaxCut <= 0 || a.MaxCut > a.Internal.MinCut {
		d.bad("autorate.max_cut", "%v is outside (0, %v]: it is the factor of the strongest cut, e.g. 0.75", a.MaxCut, a.Internal.MinCut)
	}
	if a.MaxIncrease < a.Internal.MinIncrease || a.MaxIncrease > 2 {
		d.bad("autorate.max_increase", "%v is outside [%v, 2]: it is the factor of the largest increase, e.g. 1.04", a.MaxIncrease, a.Internal.MinIncrease)
	}
	if a.HighLoad <= 0 || a.HighLoad >= 1 {
		d.bad("autorate.high_load", "%v is outside (0, 1): it is a fraction of the shaper rate, e.g. 0.75", a.HighLoad)
	}
	timing := d.decoded("autorate.response_deadline", "autorate.probe_interval", "autorate.cut_refractory",
		"autorate.bufferbloat_window", "autorate.active_reflectors", "autorate.reflectors")
	if shaping && d.decoded("autorate.active_threshold", "shaper.download", "shaper.upload",
		"autorate.download.min", "autorate.upload.min") {
		d.checkActiveThreshold(p)
	}
	if timing && a.ResponseDeadline < 2*a.ProbeInterval && (d.given("autorate.response_deadline") || d.given("autorate.probe_interval")) {
		d.warnAt(firstGiven(d, "autorate.response_deadline", "autorate.probe_interval"), "response_deadline (%s) is shorter than two probe intervals (%s): healthy reflectors will be replaced", a.ResponseDeadline, 2*a.ProbeInterval)
	}
	if active := max(a.ActiveReflectors, 1); timing && a.BufferbloatWindow > 0 {
		// Upstream's start-up check (autorate.md AR-01): the window holds
		// window × spacing of samples; a shorter refractory period lets one
		// episode of bufferbloat cut the rate again before it has refreshed.
		spacing := a.ProbeInterval.Std() / time.Duration(active)
		span := time.Duration(a.BufferbloatWindow) * spacing
		limit := a.CutRefractory.Std()
		if a.Controller != LawUpstream && !d.given("autorate.cut_refractory") {
			// macake's default (200 ms) is shorter than the default
			// window (300 ms) by design (docs/CONFIG.md): only a window
			// longer than the default one deserves the warning.
			limit = max(limit, defaultWindowSpan())
		}
		if limit < span {
			d.warnAt(firstGiven(d, "autorate.cut_refractory", "autorate.reflectors", "autorate.active_reflectors", "autorate.bufferbloat_window", "autorate.probe_interval"),
				"the bufferbloat window spans %s (%d samples %s apart, from %d active reflectors), longer than cut_refractory (%s): one episode of bufferbloat can cut the rate twice; probe more reflectors at once or set cut_refractory to at least %s",
				span, a.BufferbloatWindow, spacing, active, a.CutRefractory, span)
		}
	}
}

// defaultWindowSpan is the time the default bufferbloat window spans.
func defaultWindowSpan() time.Duration {
	a := Defaults.Autorate
	return time.Duration(a.BufferbloatWindow) * a.ProbeInterval.Std() / time.Duration(a.ActiveReflectors)
}

// firstGiven returns the first of the key paths the file gives, or the
// first path.
func firstGiven(d *decoder, paths ...string) string {
	for _, p := range paths {
		if d.given(p) {
			return p
		}
	}
	return paths[0]
}

func (d *decoder) checkBounds(p *Policy, dir string, base units.RateOrAuto, b Bounds) {
	baseKey, minKey, maxKey := "shaper."+dir, "autorate."+dir+".min", "autorate."+dir+".max"
	if !d.decoded(baseKey, minKey, maxKey) {
		return
	}
	baseName := base.Rate.String()
	if !d.given(baseKey) {
		baseName += " (the default; set " + baseKey + ")"
	}
	if b.Min > 0 && !base.Auto && b.Min > base.Rate {
		d.bad(minKey, "%s is above the base rate %s %s", b.Min, baseKey, baseName)
	}
	if b.Max.Rate > 0 && !base.Auto && base.Rate > b.Max.Rate {
		key := baseKey
		if !d.given(baseKey) {
			key = maxKey
		}
		d.bad(key, "the base rate %s %s is above %s %s", baseKey, baseName, maxKey, b.Max.Rate)
	}
	if b.Min > 0 && b.Max.Rate > 0 && b.Min > b.Max.Rate {
		d.bad(maxKey, "%s is below %s %s", b.Max.Rate, minKey, b.Min)
	}
}

func (d *decoder) checkActiveThreshold(p *Policy) {
	a := &p.Autorate
	l := Link{Policy: *p}
	for _, dir := range shape.Directions {
		if p.Shaper.Rate(dir).Auto {
			continue
		}
		lo, _, _, err := l.Rates(dir, 0, 0, 0)
		if err != nil || a.ActiveThreshold <= lo {
			continue
		}
		// The default is lowered to the smaller minimum where the link
		// is that slow (desired.ControllerConfig): only a threshold the
		// policy sets can be wrong.
		if d.given("autorate.active_threshold") {
			d.bad("autorate.active_threshold", "%s is above the %s minimum rate %s; it must not be (an idle link at its minimum would look busy)", a.ActiveThreshold, dir, lo)
		}
	}
}

func (d *decoder) checkReflectors(a *Autorate) {
	e := d.lookup("autorate.reflectors")
	if e != nil && len(a.Reflectors) == 0 {
		if _, isArray := e.raw.([]any); isArray {
			d.bad("autorate.reflectors", "needs at least one address; remove the line to use the default list")
		}
	}
	seen := map[string]int{}
	for i, r := range a.Reflectors {
		if !r.Addr.IsValid() {
			continue // already reported by the decoder
		}
		at := func() tomltext.Pos {
			if e != nil {
				return d.elemPos(e, i)
			}
			return tomltext.Pos{Line: 1, Col: 1}
		}
		u := r.Addr.Unmap()
		switch {
		case u.IsUnspecified() || u.IsMulticast() || u == broadcastV4:
			d.probs.add(d.file, at(), "autorate.reflectors[%d]: %s cannot answer probes", i, r.Addr)
			continue
		case u.Zone() != "":
			d.probs.add(d.file, at(), "autorate.reflectors[%d]: %q: write the address without a zone", i, r.String())
			continue
		}
		if j, dup := seen[u.String()]; dup {
			same := r
			same.Addr = u
			if a.Reflectors[j].String() == same.String() {
				d.probs.add(d.file, at(), "autorate.reflectors[%d]: %s is listed twice (also reflectors[%d])", i, r, j)
			} else {
				d.probs.add(d.file, at(), "autorate.reflectors[%d]: %s is listed twice (also reflectors[%d] as %q); each address is probed one way: to let `macake measure` choose between ICMP and TCP, list it once as \"auto:%s\"",
					i, u, j, a.Reflectors[j].String(), netip.AddrPortFrom(u, cmp.Or(r.Port, a.Reflectors[j].Port, 443)))
			}
			continue
		}
		seen[u.String()] = i
		a.Reflectors[i].Addr = u
	}
	n := len(a.Reflectors)
	if d.given("autorate.active_reflectors") {
		if a.ActiveReflectors < 1 || a.ActiveReflectors > n {
			d.bad("autorate.active_reflectors", "%d is outside 1..%d (the number of reflectors)", a.ActiveReflectors, n)
		}
	} else if n > 0 {
		a.ActiveReflectors = min(a.ActiveReflectors, n)
	}
}

func (d *decoder) checkBalanced(p *Policy) {
	if d.given("balanced") && p.Shaper.Mode != ModeBalanced {
		d.warnAt("balanced", "[balanced] is ignored: mode is %q (set shaper.mode = \"balanced\" to use it)", p.Shaper.Mode)
	}
	b := p.Balanced
	if v := b.EngageAfter.Std(); v < 100*time.Millisecond || v > time.Hour {
		d.bad("balanced.engage_after", "%s is outside 100ms..1h", v)
	}
	if v := b.ReleaseAfter.Std(); v < time.Second || v > 24*time.Hour {
		d.bad("balanced.release_after", "%s is outside 1s..24h", v)
	}
}
