// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/shape"
)

// TextOptions say how a status is printed for a person.
type TextOptions struct {
	// Now is the time ages are counted to.
	Now time.Time
	// GOOS picks the advice that names the service manager: launchd on
	// macOS, systemd on Linux.
	GOOS string
}

// WriteSummary prints who answered, the last reconcile and the table of
// links: what `macake status --follow` redraws.
func WriteSummary(w io.Writer, st Status, opts TextOptions) {
	writeHeader(w, st, opts)
	writeLinkTable(w, st)
}

// writeHeader prints who answered and the last reconcile.
func writeHeader(w io.Writer, st Status, opts TextOptions) {
	now := opts.Now
	d := st.Daemon
	if d.Running && (d.PermissionDenied || d.Note != "") {
		pid := ""
		if d.PID > 0 {
			pid = fmt.Sprintf(", pid %d", d.PID)
		}
		fmt.Fprintf(w, "macake watch: running%s (%s).\nThis is the static picture, without its live rates and controllers.\n", pid, d.Note)
	} else if d.Running {
		fmt.Fprintf(w, "macake watch: running, pid %d, up %s", d.PID, humanAge(time.Duration(d.UptimeSeconds*float64(time.Second))))
		if d.Version != "" {
			fmt.Fprintf(w, ", version %s", d.Version)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, "macake watch: not running (%s).\nThis is the static picture; %s.\n", d.Note, startAdvice(opts.GOOS))
	}
	for _, p := range st.Pauses {
		fmt.Fprintf(w, "Paused: %s\n", PauseText(p))
	}
	if a := st.LastApply; a != nil {
		fmt.Fprintf(w, "Last reconcile: %s ago (%s): %s", humanAge(now.Sub(a.At)), a.Trigger, reconcileOutcome(a))
		if !a.LastChange.IsZero() {
			fmt.Fprintf(w, "; last change %s ago", humanAge(now.Sub(a.LastChange)))
		}
		fmt.Fprintln(w)
	}
}

// PauseText says what a pause is in one line: "every link until
// 15:04:05 (28m10s left; by alice); 'macake resume' ends it now".
func PauseText(p Pause) string {
	what, resume := p.Link, "macake resume "+p.Link
	if p.Link == AllLinks {
		what, resume = "every link", "macake resume"
	}
	by := ""
	if p.By != "" {
		by = "; by " + p.By
	}
	return fmt.Sprintf("%s until %s (%s left%s); '%s' ends it now", what, p.Until.Local().Format("15:04:05"),
		humanAge(seconds(p.RemainingSeconds)), by, resume)
}

// startAdvice says how to start the daemon: install-daemon loads the
// launchd job on macOS; on Linux it only prints a systemd unit.
func startAdvice(goos string) string {
	if goos == "darwin" {
		return "start the daemon with 'sudo macake install-daemon'"
	}
	return "run the daemon under systemd: see 'macake install-daemon --systemd-unit'"
}

func reconcileOutcome(a *Apply) string {
	switch a.Result {
	case "no_changes":
		return "no changes"
	case "failed":
		if a.Error == nil {
			return "failed"
		}
		return "failed: " + a.Error.String()
	}
	return fmt.Sprintf("%d created, %d updated, %d removed", a.Created, a.Updated, a.Removed)
}

// writeLinkTable prints one row per active link (style-and-ux §12.3).
func writeLinkTable(w io.Writer, st Status) {
	if len(st.Links) == 0 {
		fmt.Fprintln(w, "\nNo active link: no policy matches the network now (see 'macake links').")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LINK\tINTERFACE\tMODE\tSTATE\tDOWNLOAD\tUPLOAD\tBASELINE\tDELAY ↓/↑\tLOAD ↓/↑\tBLOAT ↓/↑")
	for _, l := range st.Links {
		down, up := "-", "-"
		if l.DownloadMode == string(config.DirOff) {
			down = "off"
		}
		if l.UploadMode == string(config.DirOff) {
			up = "off"
		}
		for _, sh := range l.Shapers {
			rate := shape.FormatApprox(float64(sh.RateBits))
			if sh.NotShaped != "" {
				rate = "not shaped"
			}
			if sh.Direction == shape.Download.String() {
				down = rate
			} else if sh.Direction == shape.Upload.String() {
				up = rate
			}
		}
		state, base, delay, load, bloat := linkState(l, st.Backend.LiveError != nil), "-", "-", "-", "-"
		if c := l.Controller; c != nil && c.Responses > 0 {
			base = shape.FormatLatency(seconds(c.IdleRTTSeconds))
			delay = signedShort(c.Download.DelayDeltaSeconds) + "/" + shape.FormatLatencyChange(seconds(c.Upload.DelayDeltaSeconds))
			bloat = fmt.Sprintf("%d/%d", c.Download.Delayed, c.Upload.Delayed)
		}
		if c := l.Controller; c != nil {
			load = fmt.Sprintf("%d%%/%d%%", c.Download.LoadPercent, c.Upload.LoadPercent)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Name, l.Interface, l.ModeText(), state, down, up, base, delay, load, bloat)
	}
	tw.Flush()
}

// ModeText is the link's mode as status prints it: the policy's mode,
// or each direction's when they differ ("↓fixed ↑autorate").
func (l Link) ModeText() string {
	if l.DownloadMode != l.UploadMode && l.DownloadMode != "" && l.UploadMode != "" {
		return "↓" + l.DownloadMode + " ↑" + l.UploadMode
	}
	return l.Mode
}

// linkState is the STATE column: the controller's status, with balanced
// mode's engaged/released; what a link without a controller does, or
// "unknown" when the live state could not be read (liveUnread).
func linkState(l Link, liveUnread bool) string {
	c := l.Controller
	switch {
	case !l.PausedUntil.IsZero():
		return "paused"
	case c == nil && l.Mode == string(config.ModeOff):
		return "off"
	case c == nil && l.Shaped:
		return "static"
	case c == nil && liveUnread:
		return "unknown"
	case c == nil:
		return "not shaped"
	case l.Mode == string(config.ModeBalanced) && c.Engaged:
		return c.Status + ", engaged"
	case l.Mode == string(config.ModeBalanced):
		return c.Status + ", released"
	}
	return c.Status
}

// WriteText prints the whole status for a person: the header, the table
// of links, then each link's shapers and reflectors, config errors,
// problems, drift repairs, policies and known networks.
func WriteText(w io.Writer, st Status, opts TextOptions) {
	writeHeader(w, st, opts)
	if st.Backend.Scope != "" {
		fmt.Fprintf(w, "Backend: %s\n", st.Backend.Scope)
	}
	if st.Backend.LiveError != nil {
		fmt.Fprintf(w, "Live state: not read: %s\n", st.Backend.LiveError)
	}
	writeLinkTable(w, st)
	for _, l := range st.Links {
		fmt.Fprintf(w, "\n%s on %s (%s, profile %s)\n", l.Name, l.Interface, l.ModeText(), l.ProfileKey)
		for _, d := range []struct{ name, mode string }{{"download", l.DownloadMode}, {"upload", l.UploadMode}} {
			if d.mode == string(config.DirOff) && l.Mode != string(config.ModeOff) {
				fmt.Fprintf(w, "  %-11s %-8s not shaped (%s_mode = \"off\")\n", "-", d.name, d.name)
			}
		}
		if l.Error != nil {
			fmt.Fprintf(w, "  problem: %s\n", l.Error)
		}
		for _, a := range l.Advice {
			fmt.Fprintf(w, "  advice: %s; in %s set %s\n", a.Message, a.File, a.Edit)
		}
		c := l.Controller
		for _, sh := range l.Shapers {
			name := sh.Name
			if name == "" {
				name = "shaper"
			}
			if sh.NotShaped != "" {
				fmt.Fprintf(w, "  %-11s %-8s NOT SHAPED: %s\n", name, sh.Direction, sh.NotShaped)
				continue
			}
			fmt.Fprintf(w, "  %-11s %-8s %12s  queue %-8s %s", name, sh.Direction, shape.FormatApprox(float64(sh.RateBits)), humanBytes(sh.QueueBytes), sh.Source)
			if c != nil {
				d := c.Download
				if sh.Direction == shape.Upload.String() {
					d = c.Upload
				}
				fmt.Fprintf(w, "; range %s–%s, base %s", shape.FormatApprox(float64(d.MinBits)), shape.FormatApprox(float64(d.MaxBits)), shape.FormatApprox(float64(d.BaseBits)))
			}
			fmt.Fprintln(w)
			if sh.Stats != nil {
				fmt.Fprintf(w, "  %-11s %-8s %s\n", "", "", countersText(sh.Stats))
				for _, t := range sh.Stats.Tins {
					if line := tinText(t); line != "" {
						fmt.Fprintf(w, "  %-11s %-8s %s\n", "", "", line)
					}
				}
			}
		}
		if len(l.Shapers) == 0 {
			fmt.Fprintln(w, "  no pipes installed")
		}
		if c == nil {
			continue
		}
		if c.Note != "" {
			fmt.Fprintf(w, "  controller: %s\n", c.Note)
		}
		// Before the first reply the baselines and ages are the
		// controller's starting values, not measurements: never shown.
		measured := c.Responses > 0
		lastReply := "no reply yet"
		if measured {
			lastReply = "last reply " + shape.FormatLatency(seconds(c.SinceResponseSeconds)) + " ago"
		}
		fmt.Fprintf(w, "  controller: %s; %d replies, %d cuts, %d increases; %s\n",
			c.Status, c.Responses, c.Cuts, c.Increases, lastReply)
		for _, d := range []struct {
			name string
			d    Direction
		}{{"download", c.Download}, {"upload", c.Upload}} {
			bloat := ""
			if d.d.Bufferbloat {
				bloat = ", BUFFERBLOAT"
			}
			baseline, delay := "-", "-"
			if measured {
				baseline, delay = shape.FormatLatency(seconds(d.d.BaselineSeconds)), shape.FormatLatencyChange(seconds(d.d.DelayDeltaSeconds))
				if d.d.BaselineSeconds < 0 {
					baseline += " " + clockOffsetNote
				}
			}
			fmt.Fprintf(w, "  %-8s achieved %s (%d%%, %s), baseline %s, delay %s (threshold %s), %d delayed%s\n",
				d.name, shape.FormatApprox(float64(d.d.AchievedBits)), d.d.LoadPercent, d.d.Load, baseline,
				delay, shape.FormatLatency(seconds(d.d.DelayThresholdSeconds)), d.d.Delayed, bloat)
		}
		for _, r := range c.Reflectors {
			if r.Responses == 0 {
				fmt.Fprintf(w, "  reflector %-15s baseline -, 0 replies, no reply yet\n", r.label())
				continue
			}
			health := "ok"
			if r.Offences > 0 {
				health = fmt.Sprintf("%d missed checks", r.Offences)
			}
			base := "↓" + shape.FormatLatency(seconds(r.BaselineDownSeconds)) + " ↑" + shape.FormatLatency(seconds(r.BaselineUpSeconds))
			if r.BaselineDownSeconds < 0 || r.BaselineUpSeconds < 0 {
				base += fmt.Sprintf(" %s, round trip %s", clockOffsetNote, timestampRoundTrip(seconds(r.BaselineDownSeconds+r.BaselineUpSeconds)))
			}
			fmt.Fprintf(w, "  reflector %-15s baseline %s, %d replies, last %s ago, %s\n", r.label(),
				base, r.Responses, shape.FormatLatency(seconds(r.SinceResponseSeconds)), health)
		}
	}
	for _, l := range st.Links {
		if l.History != nil && len(l.History.Times) > 0 {
			fmt.Fprintf(w, "\n%s history\n", l.Name)
			writeHistory(w, l.History)
		}
	}
	if st.Backend.StatsError != nil {
		fmt.Fprintf(w, "\nShaper counters: not read: %s\n", st.Backend.StatsError)
	}
	if len(st.ConfigErrors) > 0 {
		fmt.Fprintln(w, "\nConfig errors in force:")
		for _, ce := range st.ConfigErrors {
			kept := ""
			switch ce.Kept {
			case "last_good":
				kept = " (its last good policy stays in force)"
			case "nothing":
				kept = " (nothing is applied for it)"
			}
			fmt.Fprintf(w, "  %s%s\n", ce.Diagnostic, kept)
		}
	}
	if len(st.Problems) > 0 {
		fmt.Fprintln(w, "\nProblems:")
		for _, p := range st.Problems {
			fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(strings.TrimSpace(p.String()), "\n", "\n  "))
		}
	}
	if a := st.LastApply; a != nil && len(a.Warnings) > 0 {
		fmt.Fprintln(w, "\nWarnings:")
		for _, wn := range a.Warnings {
			fmt.Fprintf(w, "  %s\n", wn)
		}
	}
	if n := len(st.DriftRepairs); n > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(st.DriftRepairs)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, st.DriftRepairs[k]))
		}
		fmt.Fprintf(w, "\nDrift repaired since start: %s\n", strings.Join(parts, ", "))
	}
	if len(st.Policies) > 0 {
		fmt.Fprintln(w, "\nPolicies:")
		for _, p := range st.Policies {
			mark := " "
			if p.Active {
				mark = "*"
			}
			lastGood := ""
			if p.LastGood {
				lastGood = " [last good version: the file has an error]"
			}
			fmt.Fprintf(w, "  %s %-12s %-6s %-9s %s%s\n", mark, p.Name, p.Interface, p.Mode, p.Reason, lastGood)
		}
	}
	if n := len(st.Events); n > 0 {
		fmt.Fprintln(w, "\nRecent events:")
		for _, e := range st.Events[max(0, n-recentShown):] {
			fmt.Fprintf(w, "  %s  %s\n", e.Time.In(opts.Now.Location()).Format("15:04:05"), EventSummary(e))
		}
	}
	if len(st.Profiles) > 0 {
		fmt.Fprintln(w, "\nKnown networks (state file):")
		for _, p := range st.Profiles {
			var parts []string
			if p.GoodDownloadBits > 0 || p.GoodUploadBits > 0 {
				parts = append(parts, fmt.Sprintf("known-good %s down / %s up", bitsOrDash(p.GoodDownloadBits), bitsOrDash(p.GoodUploadBits)))
			}
			if p.DownloadCapacityBits > 0 || p.UploadCapacityBits > 0 {
				parts = append(parts, fmt.Sprintf("measured %s / %s", bitsOrDash(p.DownloadCapacityBits), bitsOrDash(p.UploadCapacityBits)))
			}
			if p.IdleRTTSeconds > 0 {
				parts = append(parts, "idle rtt "+shape.FormatLatency(seconds(p.IdleRTTSeconds)))
			}
			fmt.Fprintf(w, "  %s: %s\n", p.Key, strings.Join(parts, ", "))
		}
	}
}

// recentShown is how many of the events a status carries the text shows.
const recentShown = 5

// EventSummary is one event for a person: its link, the message, and the
// attributes that say what happened (the error, the rates of a cut); a
// change says what it changed and why, and no attribute runs past
// maxEventValue, so the status page's list is not walls of rules.
func EventSummary(e Event) string {
	var b strings.Builder
	if e.Link != "" {
		b.WriteString(e.Link + ": ")
	}
	from, errF := strconv.ParseFloat(e.Attrs[logging.KeyFromBits], 64)
	to, errT := strconv.ParseFloat(e.Attrs[logging.KeyToBits], 64)
	switch {
	case errF == nil && errT == nil:
		// A rate change says its rates, not its eight attributes.
		b.WriteString(e.Message)
		fmt.Fprintf(&b, ": %s %s → %s", e.Attrs[logging.KeyDirection], shape.FormatApprox(from), shape.FormatApprox(to))
		return b.String()
	case e.Event == string(logging.EventChange):
		// What changed and why, not the before and after of every rule
		// (a reflector's exemption printed all of them).
		verb := map[string]string{"create": "created", "update": "updated", "remove": "removed"}[e.Attrs["action"]]
		if verb == "" {
			verb = e.Attrs["action"]
		}
		what := strings.TrimSpace(e.Attrs["kind"] + " " + e.Attrs["id"])
		if e.Attrs[logging.KeyError] != "" {
			fmt.Fprintf(&b, "%s not %s: %s", what, verb, clip(e.Attrs[logging.KeyError]))
			return b.String()
		}
		fmt.Fprintf(&b, "%s %s", what, verb)
		if r := e.Attrs[logging.KeyReason]; r != "" {
			b.WriteString(" (" + clip(r) + ")")
		}
		return b.String()
	}
	b.WriteString(e.Message)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(e.Attrs)) {
		parts = append(parts, k+"="+clip(e.Attrs[k]))
	}
	if len(parts) > 0 {
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	return b.String()
}

// maxEventValue is the most of one attribute's value an event's summary
// shows; the log has it whole.
const maxEventValue = 80

// clip shortens a value to maxEventValue runes, marking the cut.
func clip(v string) string {
	if r := []rune(v); len(r) > maxEventValue {
		return string(r[:maxEventValue-1]) + "…"
	}
	return v
}

// countersText is a shaper's counters in one line, as `tc -s` would say
// them: what it carried, what it dropped (and the share), what is queued.
func countersText(s *ShaperStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s in %d packets, %d dropped", humanVolume(s.Bytes), s.Packets, s.Drops)
	fmt.Fprintf(&b, ", %d queued (%s)", s.BacklogPackets, humanBytes(int64(s.BacklogBytes)))
	if s.Overlimits > 0 {
		fmt.Fprintf(&b, ", %d overlimits", s.Overlimits)
	}
	return b.String()
}

// tinText is one CAKE tin in one line, as its column in `tc -s qdisc
// show`: what entered it and what CAKE dropped or marked, what is queued, the delay
// CAKE measures and its flows; "" for a tin that has carried nothing, so
// diffserv's unused tins take no room.
func tinText(t TinStats) string {
	if t.Packets == 0 && t.Drops == 0 && t.BacklogBytes == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tin %s: %s in %d packets, %d dropped, %d marked", t.Name, humanVolume(t.Bytes), t.Packets, t.Drops, t.ECNMarks)
	if t.ACKDrops > 0 {
		fmt.Fprintf(&b, ", %d ACKs filtered", t.ACKDrops)
	}
	fmt.Fprintf(&b, ", %s queued; delay %s average, %s peak; flows %d sparse, %d bulk", humanBytes(int64(t.BacklogBytes)),
		shape.FormatLatency(seconds(t.AverageDelaySeconds)), shape.FormatLatency(seconds(t.PeakDelaySeconds)), t.SparseFlows, t.BulkFlows)
	if t.UnresponsiveFlows > 0 {
		fmt.Fprintf(&b, ", %d unresponsive", t.UnresponsiveFlows)
	}
	return b.String()
}

// humanVolume formats a byte count coarsely in the units of the policy
// files' sizes (1024-based): "812 B", "4.2 MB", "1.9 GB".
func humanVolume(b uint64) string {
	v := float64(b)
	for _, u := range []string{"B", "KB", "MB", "GB", "TB"} {
		if v < 1024 || u == "TB" {
			if u == "B" {
				return fmt.Sprintf("%d B", b)
			}
			return fmt.Sprintf("%.3g %s", v, u)
		}
		v /= 1024
	}
	return ""
}

func bitsOrDash(bits int64) string {
	if bits <= 0 {
		return "-"
	}
	return shape.FormatApprox(float64(bits))
}

// signedShort is shape.FormatLatencyChange without the unit, for "+3.2/+0.4ms".
func signedShort(s float64) string {
	return strings.TrimSuffix(shape.FormatLatencyChange(seconds(s)), "ms")
}

// clockOffsetNote explains a negative one-way baseline: ICMP timestamps
// give one-way delays measured across two clocks, so each direction is
// shifted by the reflector's clock offset (one up, the other down by as
// much); only their sum, the round trip, and the changes are delays.
const clockOffsetNote = "(one-way, shifted by the reflector's clock offset)"

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// timestampRoundTrip renders a round trip added up from two one-way
// delays of ICMP timestamps, which count whole milliseconds: below 1 ms
// their sum says only that it is short, and may even come out negative.
func timestampRoundTrip(rt time.Duration) string {
	if rt < time.Millisecond {
		return "under 1ms (ICMP timestamps count whole milliseconds)"
	}
	return shape.FormatLatency(rt)
}

// humanAge formats an elapsed time coarsely: "12s", "4m10s", "2h14m", "3d4h".
func humanAge(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// humanBytes formats a queue size: "180 KB", "1500 B".
func humanBytes(b int64) string {
	if b >= 1024 && b%1024 == 0 || b >= 10*1024 {
		return fmt.Sprintf("%d KB", b/1024)
	}
	return fmt.Sprintf("%d B", b)
}

// label is the reflector as status prints it: its address, and how it is
// probed when that is not ICMP ("1.1.1.1 tcp/443").
func (r Reflector) label() string {
	if r.Probe == "" || r.Probe == "icmp" {
		return r.Address
	}
	return fmt.Sprintf("%s %s/%d", r.Address, r.Probe, r.Port)
}
