// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/daemon"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

var statusCmd = &command{
	name:  "status",
	args:  "[--json] [--follow]",
	short: "Show links, the matched link per interface, live pipes and rates, controller state.",
	long: `Asks the running 'macake watch' over its socket (STATE_DIR/watch.sock,
readable by root and, on macOS, the admin group) and shows one row per active
link: interface, mode, controller state, the live download and upload rates,
the idle baseline, the delay above it, the load and the bufferbloat votes;
then per link its pipes (rate, queue, where the rate came from, the
controller's range), its reflectors' health, the last reconcile and its
result, config errors in force, and problems (such as pf.conf missing its
dummynet-anchor line).

Without a daemon it shows the static picture instead and says that watch is
not running: the policies and which one matches the network now, the rates a
start would use (the state file's known-good rates, else the policies'), the
live pipes if they can be read (that needs root), and the state file's
profiles. A user who may not ask the daemon gets the same static picture,
with watch said to be running when it holds the state lock (daemon.running
and daemon.permission_denied in --json).

--follow redraws the table once a second (one JSON document per line with
--json) until interrupted. --json prints the whole status in base units
(bit/s, bytes, seconds), versioned by format_version.

Exit status: 0 (whether or not the daemon runs: see daemon.running in
--json); 1 when neither the daemon nor the static picture can be read; 64
usage.`,
}

func init() { statusCmd.run = runStatus }

// statusRefresh is --follow's refresh interval.
var statusRefresh = time.Second

// fetchStatus asks the daemon (tests replace it to play a socket this
// user may not open, which root never meets).
var fetchStatus = statusapi.Fetch

// hostGOOS picks advice that names the service manager: launchd on macOS,
// systemd on Linux.
var hostGOOS = runtime.GOOS

func runStatus(e *env, args []string) int {
	fs := statusCmd.flags()
	asJSON := fs.Bool("json", false, "print the status as JSON (one document per line with --follow)")
	follow := fs.Bool("follow", false, "refresh once a second until interrupted")
	if done, code := statusCmd.parse(e, fs, args); done {
		return code
	}
	if done, code := statusCmd.noArgs(e, fs); done {
		return code
	}
	tty := isTerminal(e.stdout)
	for first := true; ; first = false {
		st, err := gatherStatus(e)
		if interrupted(e.ctx) {
			// Interrupted (Ctrl-C on --follow) mid-question: the answer,
			// if any, is not worth printing.
			return exitOK
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "macake status: %v\n", err)
			return exitFailure
		}
		switch {
		case *asJSON && *follow:
			b, _ := json.Marshal(st)
			fmt.Fprintln(e.stdout, string(b))
		case *asJSON:
			b, _ := json.MarshalIndent(st, "", "  ")
			fmt.Fprintln(e.stdout, string(b))
		case *follow:
			if tty {
				fmt.Fprint(e.stdout, "\x1b[H\x1b[2J") // home, clear: redraw in place
			} else if !first {
				fmt.Fprintln(e.stdout)
			}
			writeStatusHeader(e.stdout, st, time.Now())
			writeLinkTable(e.stdout, st)
		default:
			writeStatusText(e.stdout, st, time.Now())
		}
		if !*follow {
			return exitOK
		}
		select {
		case <-e.ctx.Done():
			return exitOK
		case <-time.After(statusRefresh):
		}
	}
}

// interrupted reports whether ctx is over. Its deadline counts as soon as
// it has passed: a dial bounded by the same deadline can fail with a
// timeout a moment before the context's own timer marks it done, and that
// half-answer ("not running") must not be printed as the status.
func interrupted(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// stateDirOf is the state directory as apply and watch choose it:
// --state-dir, or macake.toml's state_dir when the flag is left at its
// default. Commands that only read the settings for it ignore their
// problems (validate and doctor report them).
func stateDirOf(e *env) string {
	if e.stateDir != defaultStateDir {
		return e.stateDir
	}
	settings, _, err := config.LoadDaemon(config.DaemonFileFor(e.configDir), config.LoadOptions{SkipOwnershipCheck: true})
	if err == nil && settings.StateDir != "" {
		return settings.StateDir
	}
	return e.stateDir
}

// gatherStatus asks the daemon, or assembles the static picture when it
// does not answer.
func gatherStatus(e *env) (statusapi.Status, error) {
	s := &session{e: e, cmd: "status", dryRun: true}
	quiet := *e
	quiet.stderr = io.Discard // the static picture reports its own problems
	s.e = &quiet
	stateDir := stateDirOf(e)
	socket := statusapi.SocketPath(stateDir)
	st, err := fetchStatus(e.ctx, socket)
	if err == nil {
		return st, nil
	}
	note := err.Error()
	denied := errors.Is(err, statusapi.ErrPermission)
	switch {
	case errors.Is(err, statusapi.ErrNotRunning):
		note = "nothing answers on " + socket
	case denied:
		note = fmt.Sprintf("its socket answers %s only; run with sudo for its view", statusapi.SocketReaders)
	}
	st, err = staticStatus(s, stateDir, socket, note)
	if err != nil || !denied {
		return st, err
	}
	// The socket exists but may not be opened: whether watch runs is in
	// the state lock it holds, which anyone may probe.
	st.Daemon.PermissionDenied = true
	pid, holder, held, herr := reconcile.Holder(stateDir)
	switch {
	case herr != nil:
		// The socket is there and watch removes it when it stops.
		st.Daemon.Running = true
	case held && holder == reconcile.HolderWatch:
		st.Daemon.Running, st.Daemon.PID = true, pid
	default:
		st.Daemon.Note = "nothing holds the state lock, so " + socket + " is left over from a watch that did not stop cleanly"
	}
	return st, nil
}

// staticStatus is the picture without a daemon (daemon.Static), read now.
func staticStatus(s *session, stateDir, socket, note string) (statusapi.Status, error) {
	e := s.e
	if name, err := reconcile.ChooseBackend(runtime.GOOS, e.getenv); err == nil {
		s.backendName = name
	}
	in := daemon.StaticInput{
		Daemon:  statusapi.Daemon{Socket: socket, Note: note, ConfigDir: e.configDir, StateDir: stateDir},
		NotRoot: e.euid() != 0,
	}
	pol, perr := reconcile.LoadPolicies(e.configDir, s.loadOptions())
	in.Problems = config.Problems(perr)
	// What watch keeps in force for a broken file, it would keep at a
	// start too: the picture shows the same policies.
	in.Kept = reconcile.KeepLastGood(&pol, in.Problems, stateDir, s.loadOptions())
	in.Policies, in.MTU = pol.Links, reconcile.PolicyMTUs(pol.Links)
	in.State, in.StateErr = state.Load(stateDir)
	in.Backend, in.BackendErr = reconcile.OpenBackend(reconcile.BackendConfig{Settings: pol.Settings, Runner: backendRunner, Getenv: e.getenv})
	in.Facts, in.FactsErr = linkfacts.Read(e.ctx, e.getenv)
	return daemon.Static(e.ctx, in), nil
}

// writeStatusHeader prints who answered and the last reconcile.
func writeStatusHeader(w io.Writer, st statusapi.Status, now time.Time) {
	d := st.Daemon
	if d.Running && d.PermissionDenied {
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
		fmt.Fprintf(w, "macake watch: not running (%s).\nThis is the static picture; %s.\n", d.Note, startAdvice(hostGOOS))
	}
	if a := st.LastApply; a != nil {
		fmt.Fprintf(w, "Last reconcile: %s ago (%s): %s", humanAge(now.Sub(a.At)), a.Trigger, reconcileOutcome(a))
		if !a.LastChange.IsZero() {
			fmt.Fprintf(w, "; last change %s ago", humanAge(now.Sub(a.LastChange)))
		}
		fmt.Fprintln(w)
	}
}

// startAdvice says how to start the daemon: install-daemon loads the
// launchd job on macOS; on Linux it only prints a systemd unit.
func startAdvice(goos string) string {
	if goos == "darwin" {
		return "start the daemon with 'sudo macake install-daemon'"
	}
	return "run the daemon under systemd: see 'macake install-daemon --systemd-unit'"
}

func reconcileOutcome(a *statusapi.Apply) string {
	switch a.Result {
	case "no_changes":
		return "no changes"
	case "failed":
		return "failed: " + a.Error
	}
	return fmt.Sprintf("%d created, %d updated, %d removed", a.Created, a.Updated, a.Removed)
}

// writeLinkTable prints one row per active link (style-and-ux §12.3).
func writeLinkTable(w io.Writer, st statusapi.Status) {
	if len(st.Links) == 0 {
		fmt.Fprintln(w, "\nNo active link: no policy matches the network now (see 'macake links').")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LINK\tINTERFACE\tMODE\tSTATE\tDOWNLOAD\tUPLOAD\tBASELINE\tDELAY ↓/↑\tLOAD ↓/↑\tBLOAT ↓/↑")
	for _, l := range st.Links {
		down, up := "-", "-"
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
		state, base, delay, load, bloat := linkState(l, st.Backend.LiveError != ""), "-", "-", "-", "-"
		if c := l.Controller; c != nil && c.Responses > 0 {
			base = measure.HumanDuration(seconds(c.IdleRTTSeconds))
			delay = signedShort(c.Download.DelayDeltaSeconds) + "/" + measure.SignedDuration(seconds(c.Upload.DelayDeltaSeconds))
			bloat = fmt.Sprintf("%d/%d", c.Download.Delayed, c.Upload.Delayed)
		}
		if c := l.Controller; c != nil {
			load = fmt.Sprintf("%d%%/%d%%", c.Download.LoadPercent, c.Upload.LoadPercent)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Name, l.Interface, l.Mode, state, down, up, base, delay, load, bloat)
	}
	tw.Flush()
}

// linkState is the STATE column: the controller's status, with balanced
// mode's engaged/released; what a link without a controller does, or
// "unknown" when the live state could not be read (liveUnread).
func linkState(l statusapi.Link, liveUnread bool) string {
	c := l.Controller
	switch {
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

// writeStatusText is the full status: header, table, then each link's
// pipes and reflectors, config errors, problems, policies.
func writeStatusText(w io.Writer, st statusapi.Status, now time.Time) {
	writeStatusHeader(w, st, now)
	if st.Backend.Scope != "" {
		fmt.Fprintf(w, "Backend: %s\n", st.Backend.Scope)
	}
	if st.Backend.LiveError != "" {
		fmt.Fprintf(w, "Live state: not read: %s\n", st.Backend.LiveError)
	}
	writeLinkTable(w, st)
	for _, l := range st.Links {
		fmt.Fprintf(w, "\n%s on %s (%s, profile %s)\n", l.Name, l.Interface, l.Mode, l.ProfileKey)
		if l.Error != "" {
			fmt.Fprintf(w, "  problem: %s\n", l.Error)
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
			lastReply = "last reply " + measure.HumanDuration(seconds(c.SinceResponseSeconds)) + " ago"
		}
		fmt.Fprintf(w, "  controller: %s; %d replies, %d cuts, %d increases; %s\n",
			c.Status, c.Responses, c.Cuts, c.Increases, lastReply)
		for _, d := range []struct {
			name string
			d    statusapi.Direction
		}{{"download", c.Download}, {"upload", c.Upload}} {
			bloat := ""
			if d.d.Bufferbloat {
				bloat = ", BUFFERBLOAT"
			}
			baseline, delay := "-", "-"
			if measured {
				baseline, delay = measure.HumanDuration(seconds(d.d.BaselineSeconds)), measure.SignedDuration(seconds(d.d.DelayDeltaSeconds))
			}
			fmt.Fprintf(w, "  %-8s achieved %s (%d%%, %s), baseline %s, delay %s (threshold %s), %d delayed%s\n",
				d.name, shape.FormatApprox(float64(d.d.AchievedBits)), d.d.LoadPercent, d.d.Load, baseline,
				delay, measure.HumanDuration(seconds(d.d.DelayThresholdSeconds)), d.d.Delayed, bloat)
		}
		for _, r := range c.Reflectors {
			if r.Responses == 0 {
				fmt.Fprintf(w, "  reflector %-15s baseline -, 0 replies, no reply yet\n", r.Address)
				continue
			}
			health := "ok"
			if r.Offences > 0 {
				health = fmt.Sprintf("%d missed checks", r.Offences)
			}
			fmt.Fprintf(w, "  reflector %-15s baseline ↓%s ↑%s, %d replies, last %s ago, %s\n", r.Address,
				measure.HumanDuration(seconds(r.BaselineDownSeconds)), measure.HumanDuration(seconds(r.BaselineUpSeconds)), r.Responses, measure.HumanDuration(seconds(r.SinceResponseSeconds)), health)
		}
	}
	if len(st.ConfigErrors) > 0 {
		fmt.Fprintln(w, "\nConfig errors in force:")
		for _, ce := range st.ConfigErrors {
			p := config.Problem{File: ce.File, Line: ce.Line, Col: ce.Column, Message: ce.Message}
			kept := ""
			switch ce.Kept {
			case "last_good":
				kept = " (its last good policy stays in force)"
			case "nothing":
				kept = " (nothing is applied for it)"
			}
			fmt.Fprintf(w, "  %s%s\n", p.Error(), kept)
		}
	}
	if len(st.Problems) > 0 {
		fmt.Fprintln(w, "\nProblems:")
		for _, p := range st.Problems {
			fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(strings.TrimSpace(p), "\n", "\n  "))
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
		for _, k := range sortedStrings(st.DriftRepairs) {
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
				parts = append(parts, "idle rtt "+measure.HumanDuration(seconds(p.IdleRTTSeconds)))
			}
			fmt.Fprintf(w, "  %s: %s\n", p.Key, strings.Join(parts, ", "))
		}
	}
}

func bitsOrDash(bits int64) string {
	if bits <= 0 {
		return "-"
	}
	return shape.FormatApprox(float64(bits))
}

// signedShort is measure.SignedDuration without the unit, for "+3.2/+0.4ms".
func signedShort(s float64) string {
	return strings.TrimSuffix(measure.SignedDuration(seconds(s)), "ms")
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

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

func sortedStrings(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
