// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/internal/english"
	"github.com/macake/macake/session"
	"github.com/macake/macake/shape"
)

// pfTools is whether pfctl and dnctl run.
type pfTools struct {
	opts         pfdn.Options
	pfctl, dnctl toolState
}

func (in *Inspection) pfOptions() pfdn.Options {
	return pfdn.OptionsFor(session.BackendSettings(in.config().policies.Settings), in.sys.Getenv)
}

func (in *Inspection) pfTools(ctx context.Context) pfTools {
	return in.pfToolsOnce.get(func() pfTools {
		o := in.pfOptions()
		return pfTools{
			opts:  o,
			pfctl: runTool(ctx, in.sys.Runner, "pfctl", pfdn.EnvPfctl, o.Pfctl, "-s", "info"),
			dnctl: runTool(ctx, in.sys.Runner, "dnctl", pfdn.EnvDnctl, o.Dnctl, "list"),
		}
	})
}

// pfLive is pf's and dummynet's live state, when it could be read.
type pfLive struct {
	opts pfdn.Options
	live pfdn.Live
	// blocked says why it was not read: a tool is missing ("missing") or
	// needs root ("root"); "" when it was read (or failed: err).
	blocked string
	err     error
}

func (in *Inspection) pfLive(ctx context.Context) pfLive {
	return in.pfLiveOnce.get(func() pfLive {
		t := in.pfTools(ctx)
		l := pfLive{opts: t.opts}
		switch {
		case t.pfctl.missing || t.dnctl.missing || t.pfctl.err != nil || t.dnctl.err != nil:
			l.blocked = "missing"
			return l
		case t.pfctl.denied || t.dnctl.denied:
			l.blocked = "root"
			return l
		}
		b, err := pfdn.New(in.sys.Runner, &pfdn.MemoryTokens{}, t.opts)
		if err != nil {
			l.err = err
			return l
		}
		l.live, l.err = b.Observe(ctx)
		return l
	})
}

// pfGate returns the result to show instead of a pf check that cannot look,
// and whether there is one. The pf status line alone explains it, so that
// a run without root shows one warning, not one per pf check.
func pfGate(l pfLive) (report.Result, bool) {
	switch {
	case l.blocked == "missing":
		return skipped("pfctl or dnctl cannot run (see above)"), true
	case l.blocked == "root":
		r := skipped("needs root (see pf status)")
		r.NeedsRoot = true
		return r, true
	case l.err != nil:
		return skipped("reading pf and dummynet failed (see pf status)"), true
	}
	return report.Result{}, false
}

func checkPfctl(ctx context.Context, in *Inspection) report.Result {
	return toolResult(in.pfTools(ctx).pfctl, "macake needs macOS's pfctl")
}

func checkDnctl(ctx context.Context, in *Inspection) report.Result {
	return toolResult(in.pfTools(ctx).dnctl, "macake needs macOS's dnctl")
}

func checkPFStatus(ctx context.Context, in *Inspection) report.Result {
	l := in.pfLive(ctx)
	if l.blocked == "root" {
		return needsRoot("cannot read pf and dummynet without root",
			"pf's status, the hook line, macake's anchor and pipes, and other tools' anchors and pipes")
	}
	if l.blocked != "" {
		return skipped("pfctl or dnctl cannot run (see above)")
	}
	if l.err != nil {
		return problem("run `sudo pfctl -s info` and `sudo dnctl list` by hand; output macake cannot read is worth a bug report",
			"reading pf and dummynet failed: %v", l.err)
	}
	st := in.state()
	return judgePFStatus(l.live, st.state.PFToken, len(l.live.Anchor.Rules) > 0)
}

// judgePFStatus judges pf's enabled state and macake's reference. shaping
// tells whether macake's anchor holds rules, i.e. whether pf must be on.
func judgePFStatus(live pfdn.Live, heldToken string, shaping bool) report.Result {
	holds := live.HoldsToken(heldToken)
	others := len(live.References)
	if holds {
		others--
	}
	stale := ""
	if heldToken != "" && !holds {
		stale = " (the state file's pf reference is stale: pf was disabled or the Mac rebooted since)"
	}
	since := ""
	if live.Info.For > 0 {
		since = " for " + formatUptime(live.Info.For)
	}
	switch {
	case !live.Info.Enabled && shaping:
		return problem("sudo macake apply takes a new pf reference (macake watch does it by itself within a drift tick)",
			"pf is disabled, so macake's rules are not in effect%s; another tool probably ran `pfctl -d`", stale)
	case !live.Info.Enabled:
		return ok("pf is disabled; macake enables it (with its own reference) when it has something to shape%s", stale)
	case holds:
		return ok("pf is enabled%s; macake holds its own reference%s", since, othersNote(others))
	case shaping:
		return warn("sudo macake apply takes macake's own reference",
			"pf is enabled%s by others only (%s); macake holds no reference of its own, so shaping stops when they release theirs%s",
			since, english.Plural(others, "reference"), stale)
	}
	return ok("pf is enabled%s by others (%s); macake holds none, as it shapes nothing now", since, english.Plural(others, "reference"))
}

// othersNote renders how many other pf references there are.
func othersNote(n int) string {
	if n == 0 {
		return ", and nobody else does"
	}
	return fmt.Sprintf(" (%s)", english.Plural(n, "other reference"))
}

// formatUptime renders a duration as pfctl does: "2 days 03:04:05".
func formatUptime(d time.Duration) string {
	s := int64(d / time.Second)
	days := s / 86400
	s %= 86400
	return fmt.Sprintf("%d days %02d:%02d:%02d", days, s/3600, s/60%60, s%60)
}

func checkHook(ctx context.Context, in *Inspection) report.Result {
	l := in.pfLive(ctx)
	if r, gated := pfGate(l); gated {
		return r
	}
	return judgeHook(l.live, l.opts.Anchor)
}

// judgeHook checks that pf's main ruleset evaluates macake's anchor.
func judgeHook(live pfdn.Live, anchor string) report.Result {
	line := pfdn.HookLine(anchor)
	if live.Hooked(anchor) {
		return ok("pf's main ruleset has %s, which evaluates the anchor %q", line, anchor)
	}
	fix := fmt.Sprintf("add this line to /etc/pf.conf after the rdr-anchor line, then reload the main ruleset with `sudo pfctl -f /etc/pf.conf` (macake never edits the main ruleset):\n%s", line)
	return problem(fix, "pf's main ruleset lacks %s, so pf never evaluates macake's anchor %q (another tool probably loaded its own main ruleset)", line, anchor)
}

func checkAnchor(ctx context.Context, in *Inspection) report.Result {
	l := in.pfLive(ctx)
	if r, gated := pfGate(l); gated {
		return r
	}
	return judgeAnchor(l.live, l.opts, in.state().state.Slots)
}

// slotPipes maps the pipe numbers of the state file's slots to their link.
func slotPipes(slots map[string]int, r pfdn.PipeRange) map[int]string {
	m := map[int]string{}
	for link, slot := range slots {
		for _, d := range []shape.Direction{shape.Upload, shape.Download} {
			if n, err := r.Pipe(slot, d); err == nil {
				m[n] = link
			}
		}
	}
	return m
}

// judgeAnchor checks macake's anchor against its pipes and the state file's
// slots: a rule that names a missing pipe blackholes traffic; pipes no rule
// uses are leftovers.
func judgeAnchor(live pfdn.Live, o pfdn.Options, slots map[string]int) report.Result {
	roles := slotPipes(slots, o.Pipes)
	livePipes := map[int]pfdn.LivePipe{}
	for _, p := range live.Dummynet.Pipes {
		livePipes[p.Number] = p
	}
	queued := map[int]bool{}
	for _, q := range live.Dummynet.Queues {
		queued[q.Parent] = true
	}
	named := map[int]pfdn.Rule{}
	var missing []string
	ifaces := map[string][]string{}
	for _, r := range live.Anchor.Rules {
		if r.Pipe == 0 {
			continue
		}
		named[r.Pipe] = r
		dir := "upload"
		if r.Direction == "in" {
			dir = "download"
		}
		p, exists := livePipes[r.Pipe]
		desc := fmt.Sprintf("%s pipe %d", dir, r.Pipe)
		if exists {
			desc += " " + p.Config.String()
		} else {
			desc += " MISSING"
			missing = append(missing, fmt.Sprintf("pipe %d (%s on %s)", r.Pipe, dir, r.Interface))
		}
		ifaces[r.Interface] = append(ifaces[r.Interface], desc)
	}
	var details []string
	for _, iface := range slices.Sorted(maps.Keys(ifaces)) {
		link := ""
		for _, r := range live.Anchor.Rules {
			if r.Interface == iface && r.Pipe != 0 {
				if name, ok := roles[r.Pipe]; ok {
					link = fmt.Sprintf(" (link %q)", name)
				}
			}
		}
		details = append(details, fmt.Sprintf("%s%s: %s", iface, link, strings.Join(ifaces[iface], "; ")))
	}
	var leftovers, unknownSlots []string
	for _, p := range live.Dummynet.Pipes {
		if !o.Pipes.Contains(p.Number) {
			continue
		}
		if _, ok := named[p.Number]; ok {
			if _, known := roles[p.Number]; !known {
				unknownSlots = append(unknownSlots, fmt.Sprint(p.Number))
			}
			continue
		}
		if name, ok := roles[p.Number]; ok {
			leftovers = append(leftovers, fmt.Sprintf("pipe %d (link %q, %s)", p.Number, name, p.Config))
		} else if pfdn.LooksOwned(p.Config) && !queued[p.Number] {
			leftovers = append(leftovers, fmt.Sprintf("pipe %d (%s)", p.Number, p.Config))
		}
	}
	sort.Strings(unknownSlots)
	sort.Strings(leftovers)
	if len(unknownSlots) > 0 {
		details = append(details, fmt.Sprintf("the state file does not know the slot of pipes %s (lost or rebuilt?); the next apply records them from the live rules", strings.Join(unknownSlots, ", ")))
	}

	rules := english.Plural(len(live.Anchor.Rules), "rule")
	switch {
	case len(missing) > 0:
		return problem("sudo macake apply recreates the pipes (or sudo macake down removes the rules); another tool probably deleted them or ran `dnctl flush`",
			"anchor %q names %s that do not exist: pf drops the traffic those rules send there", o.Anchor, english.Join(missing, 4)).With(details...)
	case len(leftovers) > 0 && len(live.Anchor.Rules) == 0:
		return warn("sudo macake apply restores the rules (or sudo macake down removes the pipes)",
			"%s exist but anchor %q has no rules, so nothing is shaped (another tool flushed the anchor?)", english.Join(leftovers, 4), o.Anchor).With(details...)
	case len(leftovers) > 0:
		return warn("sudo macake apply removes them",
			"anchor %q has %s; %s no rule uses (leftovers)", o.Anchor, rules, english.Join(leftovers, 4)).With(details...)
	case !live.Anchor.Exists || len(live.Anchor.Rules) == 0:
		return ok("nothing installed: anchor %q is absent and no pipe in %s is macake's", o.Anchor, o.Pipes).With(details...)
	}
	return ok("anchor %q has %s on %s, and every pipe they name exists", o.Anchor, rules, strings.Join(slices.Sorted(maps.Keys(ifaces)), ", ")).With(details...)
}

func checkForeignPipes(ctx context.Context, in *Inspection) report.Result {
	l := in.pfLive(ctx)
	if r, gated := pfGate(l); gated {
		return r
	}
	return judgeForeignPipes(l.live, l.opts, in.state().state.Slots)
}

// judgeForeignPipes lists the pipes that are not macake's. Inside the range
// they are in the way (a link that needs the number replaces them); outside
// it they are listed and never touched.
func judgeForeignPipes(live pfdn.Live, o pfdn.Options, slots map[string]int) report.Result {
	roles := slotPipes(slots, o.Pipes)
	named := map[int]bool{}
	for _, r := range live.Anchor.Rules {
		named[r.Pipe] = true
	}
	queued := map[int]bool{}
	for _, q := range live.Dummynet.Queues {
		queued[q.Parent] = true
	}
	var inside, outside []int
	var details []string
	for _, p := range live.Dummynet.Pipes {
		_, role := roles[p.Number]
		switch {
		case !o.Pipes.Contains(p.Number):
			outside = append(outside, p.Number)
		case named[p.Number] || role || pfdn.LooksOwned(p.Config) && !queued[p.Number]:
			continue
		default:
			inside = append(inside, p.Number)
		}
		details = append(details, fmt.Sprintf("pipe %d: %s", p.Number, p.Config))
	}
	for _, q := range live.Dummynet.Queues {
		details = append(details, fmt.Sprintf("queue %d on pipe %d (a flow set; macake never creates them)", q.Number, q.Parent))
	}
	sort.Ints(inside)
	sort.Ints(outside)
	sort.Strings(details)
	outsideNote := ""
	if len(outside) > 0 {
		outsideNote = fmt.Sprintf("; %s outside it (%s) belong to other tools and are never touched", english.Plural(len(outside), "pipe"), joinInts(outside, 6))
	}
	if len(inside) > 0 {
		return warn(fmt.Sprintf("if they are leftovers, remove them (sudo dnctl pipe delete N); if another tool uses them, give macake another range (pipe_range in %s)", "macake.toml"),
			"%s inside macake's range %s %s not macake's: macake leaves %s alone and skips %s slot (a new link gets another; a link that has it stays unshaped until %s gone)%s",
			english.Plural(len(inside), "pipe"), o.Pipes, oneOrMany(len(inside), "is", "are"), oneOrMany(len(inside), "it", "them"), oneOrMany(len(inside), "its", "their"), oneOrMany(len(inside), "it is", "they are"), outsideNote).With(details...)
	}
	return ok("no other tool's pipe in macake's range %s%s", o.Pipes, outsideNote).With(details...)
}
