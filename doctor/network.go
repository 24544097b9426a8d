// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/internal/english"
	"github.com/macake/macake/sense/ifstat"
	"github.com/macake/macake/shape"
)

func checkLinks(ctx context.Context, in *Inspection) report.Result {
	f := in.facts(ctx)
	if f.err != nil {
		return warn("macake watch needs them to choose a policy; see `macake links`",
			"cannot read the network's facts: %v", f.err)
	}
	return judgeLinks(f, len(in.config().policies.Links))
}

// judgeLinks says which network the machine is on and which policies are
// active on it.
func judgeLinks(f linkFacts, policies int) report.Result {
	route := "no default route"
	if f.hasDefault {
		route = "default route via " + f.def.Name
		var gw []string
		if f.def.GatewayIP.IsValid() {
			gw = append(gw, "gateway "+f.def.GatewayIP.String())
		}
		if len(f.def.GatewayMAC) > 0 {
			gw = append(gw, f.def.GatewayMAC.String())
		}
		if f.def.SSID != "" {
			gw = append(gw, "SSID "+strconv.Quote(f.def.SSID))
		}
		if len(gw) > 0 {
			route += " (" + strings.Join(gw, ", ") + ")"
		}
	}
	var active, details []string
	for _, l := range f.selection.Active {
		active = append(active, fmt.Sprintf("%s on %s", l.Name, l.Match.Interface))
	}
	for _, v := range f.selection.Verdicts {
		if !v.Active {
			details = append(details, fmt.Sprintf("%s (%s): %s", v.Name, v.Interface, v.Reason))
		}
	}
	// A policy for an interface this machine does not have is a typo (the
	// example's eth0 on a machine whose port is enp3s0) more often than
	// a dock that is unplugged: say so, with the names there are.
	present := map[string]bool{}
	var names []string
	for _, i := range f.facts.Interfaces {
		present[i.Name] = true
		names = append(names, i.Name)
	}
	var missing []string
	for _, v := range f.selection.Verdicts {
		if !present[v.Interface] && len(f.facts.Interfaces) > 0 {
			missing = append(missing, fmt.Sprintf("%s names %s", v.Name, v.Interface))
		}
	}
	// Only when no policy's interface exists: a dock or dongle that is
	// unplugged takes one interface away, not all of them.
	if len(missing) > 0 && len(missing) == len(f.selection.Verdicts) && len(active) == 0 {
		return warn("fix the interface in the policy file (this machine has "+strings.Join(names, ", ")+"), or ignore this while that interface is unplugged",
			"%s; no policy matches, and %s, which this machine does not have", route, strings.Join(missing, "; ")).With(details...)
	}
	switch {
	case !f.hasDefault && len(active) == 0:
		return warn("connect to a network and run doctor again", "%s: not connected to a network?", route).With(details...)
	case len(active) == 0 && policies > 0:
		return info("%s; no policy matches this network, so nothing is shaped here (see `macake links`)", route).With(details...)
	case len(active) == 0:
		return info("%s; no policy files, so nothing is shaped", route)
	}
	return ok("%s; active: %s", route, strings.Join(active, ", ")).With(details...)
}

// probedLinks are the active links whose controller probes reflectors.
func probedLinks(sel desired.Selection) []config.Link {
	var out []config.Link
	for _, l := range sel.Active {
		if m := l.Shaper.Effective(); m == config.ModeAutorate || m == config.ModeBalanced {
			out = append(out, l)
		}
	}
	return out
}

// activeReflectors are the reflectors the controllers of links probe:
// those a running watch reports (watching, by link name), else the first
// active_reflectors of each list, which watch starts with and a plan
// exempts; each as it is probed (auto reflectors with ICMP, as before
// measure chose), without duplicate addresses.
func activeReflectors(links []config.Link, watching map[string][]netip.Addr) []shape.Reflector {
	seen := map[netip.Addr]bool{}
	var out []shape.Reflector
	for _, l := range links {
		all := l.Autorate.Probes(shape.ProbeICMP)
		probed := all[:min(max(l.Autorate.ActiveReflectors, 1), len(all))]
		if addrs, ok := watching[l.Name]; ok {
			probed = nil
			for _, a := range addrs {
				if i := slices.IndexFunc(all, func(r shape.Reflector) bool { return r.Addr == a }); i >= 0 {
					probed = append(probed, all[i])
				} else {
					probed = append(probed, shape.ICMPReflector(a))
				}
			}
		}
		for _, r := range probed {
			if !seen[r.Addr] {
				seen[r.Addr] = true
				out = append(out, r)
			}
		}
	}
	return out
}

// watchedReflectors are the reflectors a running watch's controllers
// probe, by link; nil when watch does not run or cannot be asked.
func (in *Inspection) watchedReflectors(ctx context.Context) map[string][]netip.Addr {
	if w := in.watch(ctx); w.status != nil {
		return w.status.ActiveReflectors()
	}
	return nil
}

func checkICMP(ctx context.Context, in *Inspection) report.Result {
	needV6 := false
	for _, r := range activeReflectors(probedLinks(in.facts(ctx).selection), in.watchedReflectors(ctx)) {
		if r.Kind == shape.ProbeICMP && r.Addr.Is6() {
			needV6 = true
		}
	}
	groupRange, rangeErr := "", error(nil)
	if in.sys.GOOS == "linux" && in.sys.PingGroupRange != nil {
		groupRange, rangeErr = in.sys.PingGroupRange()
	}
	return judgeICMP(in.sys.GOOS, in.sys.EUID, in.sys.Groups, groupRange, rangeErr, in.sys.ICMP.Open, needV6)
}

// pingRangeFix is how to let every group open ping sockets on Linux.
const pingRangeFix = `sudo sysctl -w net.ipv4.ping_group_range="0 2147483647" (and the same line in /etc/sysctl.d/ to keep it)`

// judgeICMP tests the permission to probe by opening ICMP sockets, never
// by sending anything. On macOS any user may open a datagram ICMP socket;
// on Linux only a group inside net.ipv4.ping_group_range may, or root with
// a raw socket, which is what macake watch uses.
func judgeICMP(goos string, euid int, groups []int, groupRange string, rangeErr error, open func(string) error, needV6 bool) report.Result {
	dgram := open("udp4")
	var raw error = errors.New("not tried")
	if dgram != nil && euid == 0 {
		raw = open("ip4:icmp")
	}
	var v6 error
	if needV6 {
		if v6 = open("udp6"); v6 != nil && euid == 0 {
			v6 = open("ip6:ipv6-icmp")
		}
	}
	inRange := ""
	if goos == "linux" {
		switch lo, hi, err := parseGroupRange(groupRange, rangeErr); {
		case err != nil:
			inRange = fmt.Sprintf("net.ipv4.ping_group_range unreadable: %v", err)
		case groupIn(groups, lo, hi):
			inRange = fmt.Sprintf("net.ipv4.ping_group_range %q includes this user's group", groupRange)
		default:
			inRange = fmt.Sprintf("net.ipv4.ping_group_range %q excludes this user's groups", groupRange)
		}
	}
	var r report.Result
	switch {
	case dgram == nil && goos == "darwin":
		r = ok("unprivileged ICMP sockets open (macOS allows them for every user)")
	case dgram == nil:
		r = ok("unprivileged ICMP (ping) sockets open: %s", inRange)
	case raw == nil:
		r = ok("raw ICMP sockets open as root, which macake watch uses; unprivileged ping sockets do not (%s), so macake monitor and measure need sudo", inRange)
		if goos == "linux" {
			r = r.With("to let every user probe: " + pingRangeFix)
		}
	case euid != 0 && goos == "linux":
		r = warn(pingRangeFix+"; or run monitor and measure with sudo",
			"this user cannot open ICMP sockets (%s): macake watch runs as root and is not affected, but monitor and measure run as this user are", inRange).With("udp4: " + dgram.Error())
	default:
		fix := "the latency probe cannot work here; on Linux give the process CAP_NET_RAW or widen net.ipv4.ping_group_range"
		return problem(fix, "cannot open an ICMP socket: udp4: %v; ip4:icmp: %v", dgram, raw)
	}
	if needV6 && v6 != nil {
		r.Status = max(r.Status, report.Warning)
		r.Fix = strings.TrimPrefix(r.Fix+"; ", "; ") + "remove the IPv6 reflectors, or allow IPv6 ICMP sockets"
		r.Message += fmt.Sprintf("; but IPv6 ICMP sockets do not (%v), so the IPv6 reflectors cannot be probed", v6)
	}
	return r
}

// parseGroupRange reads "LOW HIGH" from net.ipv4.ping_group_range.
func parseGroupRange(s string, err error) (lo, hi int64, _ error) {
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("want two numbers, got %q", s)
	}
	lo, err1 := strconv.ParseInt(f[0], 10, 64)
	hi, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("want two numbers, got %q", s)
	}
	return lo, hi, nil
}

func groupIn(groups []int, lo, hi int64) bool {
	for _, g := range groups {
		if int64(g) >= lo && int64(g) <= hi {
			return true
		}
	}
	return false
}

// echoFacts is what the active reflectors answered, through each probed
// link's interface.
type echoFacts struct {
	echoes []Echo
	err    error
}

// echoes probes each interface's links' active reflectors through that
// interface, as their controllers do: a reflector that answers through
// the default route but not through a second link is silent for it. While
// watch runs, they are the ones its controllers probe now.
func (in *Inspection) echoes(ctx context.Context) echoFacts {
	return in.echoOnce.get(func() echoFacts {
		var e echoFacts
		if in.sys.Pinger == nil {
			return e
		}
		links := probedLinks(in.facts(ctx).selection)
		watching := in.watchedReflectors(ctx)
		var ifaces []string
		for _, l := range links {
			if !slices.Contains(ifaces, l.Match.Interface) {
				ifaces = append(ifaces, l.Match.Interface)
			}
		}
		for _, iface := range ifaces {
			targets := activeReflectors(slices.DeleteFunc(slices.Clone(links), func(l config.Link) bool { return l.Match.Interface != iface }), watching)
			echoes, err := in.sys.Pinger.Ping(ctx, iface, targets)
			if err != nil {
				e.err = fmt.Errorf("through %s: %w", iface, err)
				return e
			}
			e.echoes = append(e.echoes, echoes...)
		}
		return e
	})
}

func checkReflectors(ctx context.Context, in *Inspection) report.Result {
	f := in.facts(ctx)
	if f.err != nil {
		return skipped("the link facts cannot be read")
	}
	if len(probedLinks(f.selection)) == 0 {
		return info("no active autorate or balanced policy, so no reflectors to probe")
	}
	e := in.echoes(ctx)
	switch {
	case e.err != nil && in.sys.EUID != 0:
		// macake watch probes as root; this user may simply not be allowed
		// to open ICMP sockets (the ICMP check says so).
		return needsRoot(fmt.Sprintf("cannot probe the reflectors as this user: %v", e.err), "whether the reflectors answer")
	case e.err != nil:
		return problem("see the ICMP check above", "cannot probe the reflectors: %v", e.err)
	}
	return judgeEchoes(e.echoes)
}

// judgeEchoes judges the reflectors' answers: the controller needs at least
// some of them; it retires silent ones for spares.
func judgeEchoes(echoes []Echo) report.Result {
	var answered, silent, details []string
	// With several links probed, each target is named with the interface
	// it was probed through.
	several := slices.ContainsFunc(echoes, func(e Echo) bool { return e.Interface != echoes[0].Interface })
	for _, e := range echoes {
		target := e.Target.String()
		if several {
			target += " via " + e.Interface
		}
		switch {
		case e.Received > 0:
			answered = append(answered, fmt.Sprintf("%s %s", target, e.RTT.Round(100*time.Microsecond)))
			details = append(details, fmt.Sprintf("%s: %d/%d replies, median %s", target, e.Received, e.Sent, e.RTT.Round(100*time.Microsecond)))
		default:
			silent = append(silent, target)
			why := "no reply"
			if e.Err != "" {
				why = e.Err
			}
			details = append(details, fmt.Sprintf("%s: 0/%d replies (%s)", target, e.Sent, why))
		}
	}
	n := len(echoes)
	switch {
	case n == 0:
		return info("no reflectors to probe")
	case len(answered) == 0:
		return problem("check the network, and that ICMP echo is not blocked on the way; choose reflectors that answer ping in [autorate] reflectors",
			"none of the %s answers, so the controller cannot measure latency and holds its rates", english.Plural(n, "reflector")).With(details...)
	case len(silent) > 0:
		return warn("the controller replaces silent reflectors with spares; if the same ones stay silent, list others in [autorate] reflectors",
			"%d of %s do not answer: %s", len(silent), english.Plural(n, "reflector"), strings.Join(silent, ", ")).With(details...)
	}
	return ok("%s answer: %s", english.Plural(n, "reflector"), english.Join(answered, 6)).With(details...)
}

// counterFacts is two readings of the default route's interface counters.
type counterFacts struct {
	iface       string
	first, last ifstat.Counters
	wait        time.Duration
	err         error
}

func (in *Inspection) counters(ctx context.Context) counterFacts {
	return in.countersOnce.get(func() counterFacts {
		f := in.facts(ctx)
		var c counterFacts
		if f.err != nil || !f.hasDefault || in.sys.Counters == nil {
			return c
		}
		c.iface, c.wait = f.def.Name, in.sys.CounterWait
		if c.first, c.err = in.sys.Counters.Read(c.iface); c.err != nil {
			return c
		}
		sleep := in.sys.Sleep
		if sleep == nil {
			sleep = sleepCtx
		}
		if c.err = sleep(ctx, c.wait); c.err != nil {
			return c
		}
		c.last, c.err = in.sys.Counters.Read(c.iface)
		return c
	})
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func checkCounters(ctx context.Context, in *Inspection) report.Result {
	c := in.counters(ctx)
	if c.iface == "" {
		return skipped("no default route (see the link check)")
	}
	return judgeCounters(c)
}

// judgeCounters checks that the controller can see the load on the
// interface: the counters are readable, and the byte counters are not
// stuck at zero while packets move (a macOS bug on some machines).
func judgeCounters(c counterFacts) report.Result {
	if c.err != nil {
		if errors.Is(c.err, ifstat.ErrNoInterface) {
			return problem("run doctor again once the interface is back", "interface %s has disappeared: %v", c.iface, c.err)
		}
		return problem("the controller cannot see the load without them; report this with your OS version",
			"cannot read %s's byte counters: %v", c.iface, c.err)
	}
	const stuckFix = `the controller cannot tell load on this link and will not raise its rates; use mode = "fixed" for it until an OS update fixes the counters`
	// The cumulative counters show a stuck byte counter even when nothing
	// moved during the wait.
	total := ifstat.Diff(ifstat.Counters{Index: c.last.Index}, c.last)
	d := ifstat.Diff(c.first, c.last)
	switch {
	case d.Reset:
		return warn("run doctor again", "%s's counters were reset between two readings: %s", c.iface, d.Problem)
	case d.Stuck:
		return problem(stuckFix, "%s: %s", c.iface, d.Problem)
	case total.Stuck:
		return problem(stuckFix, "%s: %s since it came up", c.iface, strings.TrimSuffix(total.Problem, "; load unknown"))
	}
	var r report.Result
	if d.RxBytes == 0 && d.TxBytes == 0 {
		r = ok("%s's counters are readable (no traffic during %s)", c.iface, c.wait)
	} else {
		secs := c.wait.Seconds()
		if secs <= 0 {
			secs = 1
		}
		down := shape.FormatApprox(float64(d.RxBytes) * 8 / secs)
		up := shape.FormatApprox(float64(d.TxBytes) * 8 / secs)
		r = ok("%s's counters move: %s down, %s up over %s", c.iface, down, up, c.wait)
	}
	if c.last.Rounded {
		r = r.With("the counters come from NET_RT_IFLIST2, which rounds bytes to 1 KiB and wraps at 4 GiB: load readings are coarse")
	}
	return r
}
