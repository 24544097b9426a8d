// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	iofs "io/fs"
	"net"
	"strings"
	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/cmd/macake/internal/measuretarget"
	"github.com/macake/macake/daemon/measurerecord"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/internal/terminal"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
)

var measureCmd = &command{
	name:  "measure",
	args:  "[--link NAME] [--server URL] [--json] [--duration D] [--no-save] | --serve ADDR",
	short: "Measure idle baseline, capacity both ways and bloat under load; save to the state file.",
	long: `Measures the link in four phases: idle latency (to the reflectors and to
the gateway), then a download, an upload and both at once, each saturating
the link with parallel HTTP streams while latency is sampled. It reports the
capacity each way and the latency each load added, like for like at each
percentile (loaded p50 minus idle p50, loaded p90 minus idle p90), the
bufferbloat grade A+ to F (DSLReports/Waveform thresholds, from the added
median) per direction, both ways and overall, the responsiveness in round
trips per minute (RPM, the IPPM responsiveness draft, as Apple's
networkQuality) under each load, a confidence note when the run was too
short or too noisy to trust, and compares the gateway's latency with the
reflectors' to tell whether the queue builds on the LAN (this machine, Wi-Fi)
or beyond the gateway (the ISP). On macOS, Apple's networkQuality -c is run
as a cross-check when measuring against the default endpoint, and its
responsiveness and the grade its working round trip gives are shown beside
macake's. The result is saved as the link's profile in the state file, keyed
by the link and its gateway's MAC address (the key macake watch looks up);
nothing is saved if a phase fails or stalls. --link names the policy to
measure; it must match the current network on its interface, else measure
refuses rather than save a profile watch would never use. A link whose
interface does not carry the default route is measured through itself:
the probes and the speed test's connections are bound to its interface
(it needs a gateway of its own), so the primary link is not measured
under its name.
It is written under the state lock; while 'macake watch' runs (and holds the
lock), measure hands the profile to the daemon, which saves it and uses it at
once.

Endpoints: by default Cloudflare's public speed test (speed.cloudflare.com,
the __down and __up URLs). To measure against your own server, run
"macake measure --serve :8080" on a machine beyond the link and pass
--server http://HOST:8080 here; its latency is then measured too.

No root is needed, except to write the default state directory.

Exit status: 0 success (and, with --serve, after an interrupt); 1 failure:
no policy matches, the server cannot be reached, a phase failed or stalled,
the profile could not be saved (the measurement is still printed), or
--serve cannot listen on a valid address (it is in use, or needs root);
64 usage (a flag's value, e.g. --serve :99999 or a --server that is not an
http(s) URL).`,
}

func init() { measureCmd.run = runMeasure }

// measureOpts are the flags of a measurement, shared by measure and
// init --measure.
type measureOpts struct {
	link, server   string
	duration, idle time.Duration
	streams        int
	noNQ, quiet    bool
	reflectors     reflectorList
	// iface measures that interface for a link with no policy yet
	// (init), instead of link's or the default route's.
	iface string
}

// register defines the measurement's flags on fs.
func (o *measureOpts) register(fs *flag.FlagSet) {
	fs.StringVar(&o.server, "server", "", "speed-test server `URL` (started with macake measure --serve); default: speed.cloudflare.com")
	durationVar(fs, &o.duration, "duration", 10*time.Second, "length of the download and of the upload phase")
	durationVar(fs, &o.idle, "idle", 5*time.Second, "length of the idle phase")
	fs.IntVar(&o.streams, "streams", 8, "parallel connections per direction")
	fs.BoolVar(&o.noNQ, "no-networkquality", false, "skip the networkQuality cross-check (macOS)")
	fs.Var(&o.reflectors, "reflector", "reflector to probe instead of the link's: `ADDR`, tcp:ADDR:PORT, udp:ADDR:PORT, or auto:ADDR:PORT to compare ICMP with TCP (repeatable)")
}

// check reports flags out of range, for a usage error.
func (o *measureOpts) check() error {
	if o.duration < 2*time.Second || o.idle < time.Second || o.streams < 1 || o.streams > 64 {
		return errors.New("--duration must be at least 2s, --idle at least 1s, --streams 1 to 64")
	}
	return nil
}

func runMeasure(e *env, args []string) int {
	fs := measureCmd.flags()
	var o measureOpts
	fs.StringVar(&o.link, "link", "", "the policy (links.d/`NAME`.toml) to measure, through its own interface, and save the profile for; it must match this network; default: the one matching this network on the default route's interface")
	serve := fs.String("serve", "", "run the speed-test server on `ADDR` (e.g. :8080) until interrupted, instead of measuring")
	asJSON := fs.Bool("json", false, "print the result as one JSON document")
	noSave := fs.Bool("no-save", false, "do not save the profile to the state file")
	o.register(fs)
	if done, code := measureCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	if *serve != "" {
		return serveSpeedtest(e, *serve)
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(e.stderr, "macake measure: %v\n", err)
		return exitcode.Usage
	}
	if code, ok := checkServerFlag(e, "measure", o.server); !ok {
		return code
	}
	o.quiet = *asJSON
	rep, err := e.measureOnce(o)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake measure: %v\n", err)
		return exitcode.Failure
	}
	code := exitcode.OK
	if !*noSave {
		if viaWatch, err := saveProfile(e, rep); err != nil {
			fmt.Fprintf(e.stderr, "macake measure: %s\n", notSavedMessage(err))
			code = exitcode.Failure
		} else {
			rep.Saved, rep.SavedByWatch = true, viaWatch
		}
	}
	if *asJSON {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
	} else {
		rep.WriteText(e.stdout, stateDirOf(e))
	}
	return code
}

// checkServerFlag refuses a --server that is not a speed-test server's
// URL before anything is measured: it is a usage error (64), not a
// failure of the network.
func checkServerFlag(e *env, cmd, server string) (int, bool) {
	if server == "" {
		return exitcode.OK, true
	}
	if _, err := speedtest.ServerEndpoint(server); err != nil {
		fmt.Fprintf(e.stderr, "macake %s: %v\n", cmd, err)
		return exitcode.Usage, false
	}
	return exitcode.OK, true
}

// measureOnce runs one measurement (measure.Measurement) of what
// resolveTarget chooses, or of interface o.iface for a link with no
// policy yet, with progress on stderr. It saves nothing.
func (e *env) measureOnce(o measureOpts) (*measure.Report, error) {
	var target measure.Target
	var err error
	if o.iface != "" {
		var facts linkfacts.Facts
		if facts, err = linkfacts.Read(e.ctx, e.getenv); err == nil {
			target, err = measuretarget.Interface(facts, o.iface, o.reflectors)
		}
	} else {
		target, err = resolveTarget(e, o.link, o.reflectors)
	}
	if err != nil {
		return nil, err
	}
	if target.Note != "" && !o.quiet {
		fmt.Fprintf(e.stderr, "note: %s\n", target.Note)
	}
	return measure.Measurement{
		Target: target, Server: o.server, Streams: o.streams, Idle: o.idle, Duration: o.duration,
		NoNetworkQuality: o.noNQ, Progress: e.stderr, TTY: terminal.IsTerminal(e.stderr),
	}.Run(e.ctx)
}

// notSavedMessage explains a failed save; only a permission error earns
// the hint to use sudo (root gets it for other reasons too).
func notSavedMessage(err error) string {
	msg := fmt.Sprintf("measured, but not saved: %v", err)
	if errors.Is(err, iofs.ErrPermission) {
		msg += " (run with sudo to save, or pass --no-save)"
	}
	return msg
}

// serveSpeedtest runs the speed-test server until interrupted.
func serveSpeedtest(e *env, addr string) int {
	lc := speedtest.ListenConfig()
	ln, err := lc.Listen(e.ctx, "tcp", addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake measure --serve: %v\n", err)
		// An address that is no address (a port out of range, a missing
		// port) is the user's typo; one in use or reserved is the machine's.
		if errors.As(err, new(*net.AddrError)) {
			fmt.Fprintln(e.stderr, "Give a listen address such as :8080 or 192.0.2.1:8080.")
			return exitcode.Usage
		}
		return exitcode.Failure
	}
	local, _ := net.InterfaceAddrs()
	fmt.Fprintf(e.stderr, "serving the macake speed test (Ctrl-C to stop); measure against it with --server %s\n", strings.Join(speedtest.URLs(ln.Addr(), local), " or "))
	if err := speedtest.Serve(e.ctx, ln); err != nil {
		fmt.Fprintf(e.stderr, "macake measure --serve: %v\n", err)
		return exitcode.Failure
	}
	return exitcode.OK
}

// saveProfile records the measurement under the link's identity (what the
// controller learned there, the known-good rates, stays); see
// measurerecord.Record.
func saveProfile(e *env, r *measure.Report) (viaWatch bool, err error) {
	p, err := r.Profile(time.Now().UTC())
	if err != nil {
		return false, err
	}
	return measurerecord.Record(e.ctx, stateDirOf(e), r.ProfileKey, p, e.stderr)
}
