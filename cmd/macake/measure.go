// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/measure"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/state"
)

var measureCmd = &command{
	name:  "measure",
	args:  "[--link NAME] [--server URL] [--json] [--duration D] [--no-save] | --serve ADDR",
	short: "Measure idle baseline, capacity both ways and bloat under load; save to the state file.",
	long: `Measures the link in three phases: idle latency (to the reflectors and to
the gateway), then a download and an upload that saturate the link with
parallel HTTP streams while latency is sampled. It reports the capacity each
way and the latency the load added, like for like at each percentile (loaded
p50 minus idle p50, loaded p90 minus idle p90), and compares the gateway's
latency with the reflectors' to tell whether the queue builds on the LAN
(this Mac, Wi-Fi) or beyond the gateway (the ISP). On macOS, Apple's
networkQuality is run as a cross-check when measuring against the default
endpoint. The result is saved as the link's profile in the state file, keyed
by the link and its gateway's MAC address (the key macake watch looks up);
nothing is saved if a phase fails or stalls. --link names the policy to
measure; it must match the current network on the interface that carries
the default route (the one the test's traffic crosses), else measure
refuses rather than measure another interface under its name.
It is written under the state lock; while 'macake watch' runs (and holds the
lock), measure hands the profile to the daemon, which saves it and uses it at
once.

Endpoints: by default Cloudflare's public speed test (speed.cloudflare.com,
the __down and __up URLs). To measure against your own server, run
"macake measure --serve :8080" on a machine beyond the link and pass
--server http://HOST:8080 here; its latency is then measured too.

No root is needed, except to write the default state directory.`,
}

func init() { measureCmd.run = runMeasure }

func runMeasure(e *env, args []string) int {
	fs := measureCmd.flags()
	linkName := fs.String("link", "", "the policy (links.d/NAME.toml) to measure and save the profile for; it must match this network on the default route's interface; default: the one matching this network")
	server := fs.String("server", "", "speed-test server `URL` (started with macake measure --serve); default: speed.cloudflare.com")
	serve := fs.String("serve", "", "run the speed-test server on `ADDR` (e.g. :8080) until interrupted, instead of measuring")
	asJSON := fs.Bool("json", false, "print the result as one JSON document")
	var duration, idle time.Duration
	durationVar(fs, &duration, "duration", 10*time.Second, "length of the download and of the upload phase")
	durationVar(fs, &idle, "idle", 5*time.Second, "length of the idle phase")
	streams := fs.Int("streams", 8, "parallel connections per direction")
	noSave := fs.Bool("no-save", false, "do not save the profile to the state file")
	noNQ := fs.Bool("no-networkquality", false, "skip the networkQuality cross-check (macOS)")
	var reflectors addrList
	fs.Var(&reflectors, "reflector", "reflector `ADDR` to probe instead of the link's (repeatable)")
	if done, code := measureCmd.parse(e, fs, args); done {
		return code
	}
	if done, code := measureCmd.noArgs(e, fs); done {
		return code
	}
	if *serve != "" {
		return serveSpeedtest(e, *serve)
	}
	if duration < 2*time.Second || idle < time.Second || *streams < 1 || *streams > 64 {
		fmt.Fprintln(e.stderr, "macake measure: --duration must be at least 2s, --idle at least 1s, --streams 1 to 64")
		return exitUsage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(e.stderr, "macake measure: "+format+"\n", a...)
		return exitFailure
	}

	target, err := resolveTarget(e, *linkName, reflectors)
	if err != nil {
		return fail("%v", err)
	}
	if target.Note != "" && !*asJSON {
		fmt.Fprintf(e.stderr, "note: %s\n", target.Note)
	}
	endpoint, latencyTargets, err := chooseEndpoint(e.ctx, *server, target.Reflectors)
	if err != nil {
		return fail("%v", err)
	}
	lt := loadTest{
		Endpoint: endpoint, Streams: *streams, Idle: idle, Duration: duration,
		Targets: latencyTargets, Gateway: target.Facts.GatewayIP, ProbeInterval: target.ProbeInterval,
		Progress: e.stderr, TTY: isTerminal(e.stderr), Command: "measure",
	}
	res, err := lt.run(e.ctx)
	if err != nil {
		return fail("%v; nothing saved", err)
	}
	rep := newMeasureReport(target, endpoint, lt, res)
	if runtime.GOOS == "darwin" && *server == "" && !*noNQ {
		fmt.Fprintln(e.stderr, "measure: cross-checking with networkQuality (about 20 s; --no-networkquality skips it)")
		if nq, err := runNetworkQuality(e.ctx, target.Interface); err == nil {
			rep.NetworkQuality = nq
		} else if !errors.Is(err, errNoNetworkQuality) {
			fmt.Fprintf(e.stderr, "note: networkQuality cross-check failed: %v\n", err)
		}
	}
	code := exitOK
	if !*noSave {
		if viaWatch, err := saveProfile(e, target, rep); err != nil {
			fmt.Fprintf(e.stderr, "macake measure: %s\n", notSavedMessage(err))
			code = exitFailure
		} else {
			rep.Saved, rep.SavedByWatch = true, viaWatch
		}
	}
	if *asJSON {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
	} else {
		rep.writeText(e.stdout, stateDirOf(e))
	}
	return code
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

// chooseEndpoint picks the speed-test endpoint and checks that it answers.
// With --server, the server's host joins the latency targets: it is the
// far end of the path under test.
func chooseEndpoint(ctx context.Context, server string, reflectors []netip.Addr) (speedtest.Endpoint, []netip.Addr, error) {
	targets := slices.Clone(reflectors)
	if server == "" {
		ep := speedtest.Cloudflare()
		if err := speedtest.Check(ctx, nil, ep, 5*time.Second); err != nil {
			return ep, nil, fmt.Errorf("the default speed-test endpoint is not reachable (%v). Is this machine offline? To measure against your own server, run `macake measure --serve :8080` on a machine beyond the link and pass --server http://HOST:8080", err)
		}
		return ep, targets, nil
	}
	ep, err := speedtest.ServerEndpoint(server)
	if err != nil {
		return ep, nil, err
	}
	if err := speedtest.Check(ctx, nil, ep, 5*time.Second); err != nil {
		return ep, nil, fmt.Errorf("%v (is `macake measure --serve` running there?)", err)
	}
	u, _ := url.Parse(server)
	if host, err := resolveHost(ctx, u.Hostname()); err == nil && !contains(targets, host) {
		targets = append(targets, host)
	}
	return ep, targets, nil
}

// serveSpeedtest runs the speed-test server until interrupted.
func serveSpeedtest(e *env, addr string) int {
	lc := speedtest.ListenConfig()
	ln, err := lc.Listen(e.ctx, "tcp", addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake measure --serve: %v\n", err)
		return exitFailure
	}
	srv := &http.Server{Handler: speedtest.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(e.stderr, "serving the macake speed test on http://%s (Ctrl-C to stop)\n", ln.Addr())
	go func() {
		<-e.ctx.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		fmt.Fprintf(e.stderr, "macake measure --serve: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// measureFormatVersion versions the JSON report.
const measureFormatVersion = "1.0"

type latencyJSON struct {
	P50 *int64 `json:"p50_us"`
	P90 *int64 `json:"p90_us"`
}

type phaseJSON struct {
	BitsPerSecond int64 `json:"bits_per_second"`
	// Added is loaded minus idle at each percentile (median over targets).
	Added       latencyJSON `json:"added"`
	Loaded      latencyJSON `json:"loaded"`
	Targets     int         `json:"targets_compared"`
	GatewayAdd  latencyJSON `json:"gateway_added"`
	TotalBytes  int64       `json:"bytes"`
	StreamCount int         `json:"streams"`
}

type targetJSON struct {
	Address  string      `json:"address"`
	Idle     latencyJSON `json:"idle"`
	Download latencyJSON `json:"download"`
	Upload   latencyJSON `json:"upload"`
}

type measureReport struct {
	FormatVersion     string          `json:"format_version"`
	Link              string          `json:"link,omitempty"`
	Interface         string          `json:"interface"`
	GatewayIP         string          `json:"gateway_ip,omitempty"`
	GatewayMAC        string          `json:"gateway_mac,omitempty"`
	Server            string          `json:"server"`
	CongestionControl string          `json:"congestion_control,omitempty"`
	Idle              latencyJSON     `json:"idle"`
	GatewayIdle       latencyJSON     `json:"gateway_idle"`
	Download          phaseJSON       `json:"download"`
	Upload            phaseJSON       `json:"upload"`
	Targets           []targetJSON    `json:"targets"`
	Verdict           string          `json:"verdict"`
	NetworkQuality    *networkQuality `json:"network_quality,omitempty"`
	ProfileKey        string          `json:"profile_key"`
	Saved             bool            `json:"saved"`
	// SavedByWatch: macake watch held the state lock, so measure handed
	// the profile to it, and the daemon saved it.
	SavedByWatch bool `json:"saved_by_watch,omitempty"`

	idleP50 time.Duration
	res     loadTestResult
	target  measure.Target
}

func lat(s probe.Summary) latencyJSON { return latencyJSON{jsonMicros(s.P50), jsonMicros(s.P90)} }

// medianOf returns the median over targets with samples of one statistic.
func medianOf(m map[netip.Addr]probe.Summary, pick func(probe.Summary) time.Duration) time.Duration {
	var v []time.Duration
	for _, s := range m {
		if s.Samples > 0 {
			v = append(v, pick(s))
		}
	}
	return probe.Median(v)
}

func p50(s probe.Summary) time.Duration { return s.P50 }
func p90(s probe.Summary) time.Duration { return s.P90 }

func newMeasureReport(t measure.Target, ep speedtest.Endpoint, lt loadTest, res loadTestResult) *measureReport {
	r := &measureReport{
		FormatVersion: measureFormatVersion, Link: t.Link, Interface: t.Interface,
		GatewayMAC: t.Facts.GatewayMAC.String(), Server: ep.Name, CongestionControl: res.Congestion,
		ProfileKey: t.ProfileKey(), res: res, target: t,
	}
	if t.Facts.GatewayIP.IsValid() {
		r.GatewayIP = t.Facts.GatewayIP.String()
		r.GatewayIdle = lat(res.GatewayIdle)
	}
	r.idleP50 = medianOf(res.Idle, p50)
	r.Idle = latencyJSON{jsonMicros(r.idleP50), jsonMicros(medianOf(res.Idle, p90))}
	phase := func(sp speedtest.Result, pl phaseLatency) phaseJSON {
		return phaseJSON{
			BitsPerSecond: int64(sp.BitsPerSecond), TotalBytes: sp.Bytes, StreamCount: sp.Streams,
			Added:      latencyJSON{jsonMicros(pl.Added.P50), jsonMicros(pl.Added.P90)},
			Loaded:     latencyJSON{jsonMicros(medianOf(pl.Targets, p50)), jsonMicros(medianOf(pl.Targets, p90))},
			Targets:    pl.Added.Targets,
			GatewayAdd: latencyJSON{jsonMicros(pl.GatewayAdded.P50), jsonMicros(pl.GatewayAdded.P90)},
		}
	}
	r.Download = phase(res.Download, res.DownLatency)
	r.Upload = phase(res.Upload, res.UpLatency)
	for _, a := range lt.Targets {
		r.Targets = append(r.Targets, targetJSON{Address: a.String(), Idle: lat(res.Idle[a]), Download: lat(res.DownLatency.Targets[a]), Upload: lat(res.UpLatency.Targets[a])})
	}
	r.Verdict = verdict(res.DownLatency, res.UpLatency, lt.Gateway.IsValid())
	return r
}

// bloatThreshold: added latency below this at the median is not worth
// shaping for.
const bloatThreshold = 5 * time.Millisecond

// verdict says in one sentence whether the link is bloated and where the
// queue builds: if the gateway's latency rises about as much as the
// reflectors', the queue is at or before the gateway (this Mac, Wi-Fi,
// the LAN); if not, it is beyond it (the ISP's link).
func verdict(down, up phaseLatency, haveGateway bool) string {
	worst, dir := down, "download"
	if up.Added.P50 > down.Added.P50 {
		worst, dir = up, "upload"
	}
	if worst.Added.Targets == 0 {
		return "No latency target answered under load: the latency added by the load is unknown."
	}
	if worst.Added.P50 < bloatThreshold {
		return fmt.Sprintf("No significant bufferbloat: load adds at most %s at the median.", signedDuration(worst.Added.P50))
	}
	where := "the gateway's latency was not measured, so where the queue builds is unknown"
	if haveGateway && worst.GatewayAdded.Targets > 0 {
		if worst.GatewayAdded.P50 >= worst.Added.P50/2 {
			where = fmt.Sprintf("the gateway's latency rose too (%s), so the queue builds at or before the gateway: this Mac, Wi-Fi or the LAN", signedDuration(worst.GatewayAdded.P50))
		} else {
			where = fmt.Sprintf("the gateway stayed at %s, so the queue builds beyond the gateway, on the ISP's link: shaping on this machine will help", signedDuration(worst.GatewayAdded.P50))
		}
	}
	article := "a"
	if dir == "upload" {
		article = "an"
	}
	return fmt.Sprintf("Bufferbloat: %s %s adds %s at the median and %s at p90; %s.", article, dir, signedDuration(worst.Added.P50), signedDuration(worst.Added.P90), where)
}

func (r *measureReport) writeText(w io.Writer, stateDir string) {
	name := r.Interface
	if r.Link != "" {
		name = r.Link + " (" + r.Interface + ")"
	}
	fmt.Fprintf(w, "%-14s %s", "Link", name)
	if r.GatewayIP != "" {
		fmt.Fprintf(w, ", gateway %s", r.GatewayIP)
		if r.GatewayMAC != "" {
			fmt.Fprintf(w, " (%s)", r.GatewayMAC)
		}
	}
	fmt.Fprintf(w, "\n%-14s %s, %d streams", "Server", r.Server, r.Download.StreamCount)
	if r.CongestionControl != "" {
		fmt.Fprintf(w, ", %s", r.CongestionControl)
	}
	fmt.Fprintf(w, "\n%-14s download %s, upload %s\n", "Capacity", humanRate(float64(r.Download.BitsPerSecond)), humanRate(float64(r.Upload.BitsPerSecond)))
	gw := r.GatewayIP != ""
	row := func(name, a, b, c, d string) {
		fmt.Fprintf(w, "  %-12s %-10s %-10s", name, a, b)
		if gw {
			fmt.Fprintf(w, " %-12s %s", c, d)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%-14s %-10s %-10s", "Latency", "p50", "p90")
	if gw {
		fmt.Fprintf(w, " %-12s %s", "gateway p50", "gateway p90")
	}
	fmt.Fprintln(w)
	row("idle", humanDuration(r.res.idle(p50)), humanDuration(r.res.idle(p90)), humanDuration(r.res.GatewayIdle.P50), humanDuration(r.res.GatewayIdle.P90))
	for _, ph := range []struct {
		name string
		pl   phaseLatency
	}{{"download", r.res.DownLatency}, {"upload", r.res.UpLatency}} {
		row(ph.name, signedOrDash(ph.pl.Added.P50), signedOrDash(ph.pl.Added.P90), signedOrDash(ph.pl.GatewayAdded.P50), signedOrDash(ph.pl.GatewayAdded.P90))
	}
	fmt.Fprintf(w, "%-14s (under load: the latency added, loaded minus idle at the same percentile)\n", "")
	if nq := r.NetworkQuality; nq != nil {
		fmt.Fprintf(w, "%-14s download %s, upload %s, idle %s, responsiveness %.0f RPM\n", "networkQuality",
			humanRate(nq.DownloadBitsPerSecond), humanRate(nq.UploadBitsPerSecond), humanDuration(time.Duration(nq.BaseRTTMs*float64(time.Millisecond))), nq.Responsiveness)
	}
	fmt.Fprintf(w, "\n%s\n", r.Verdict)
	switch {
	case r.SavedByWatch:
		fmt.Fprintf(w, "Saved profile %s to %s (through macake watch, which uses it now)\n", r.ProfileKey, state.Path(stateDir))
	case r.Saved:
		fmt.Fprintf(w, "Saved profile %s to %s\n", r.ProfileKey, state.Path(stateDir))
	}
}

func (r loadTestResult) idle(pick func(probe.Summary) time.Duration) time.Duration {
	return medianOf(r.Idle, pick)
}

func signedOrDash(d time.Duration) string {
	if d == -1 {
		return "-"
	}
	return signedDuration(d)
}

// saveProfile records the measurement under the link's identity (what the
// controller learned there, the known-good rates, stays); see
// recordMeasurement.
func saveProfile(e *env, t measure.Target, r *measureReport) (viaWatch bool, err error) {
	if r.Download.BitsPerSecond <= 0 || r.Upload.BitsPerSecond <= 0 {
		return false, errors.New("a direction measured no throughput")
	}
	m := state.Profile{
		Link: t.Link, DownloadCapacity: r.Download.BitsPerSecond, UploadCapacity: r.Upload.BitsPerSecond,
		IdleRTT: max(r.idleP50, 0), MeasuredAt: time.Now().UTC(),
	}
	if m.Link == "" {
		m.Link = t.Interface
	}
	return recordMeasurement(e.ctx, stateDirOf(e), r.ProfileKey, m, e.stderr)
}

// measureLockTries bounds how often measure goes between the state lock
// and the daemon's socket: a starting watch holds the lock before it
// answers, a stopping one stops answering before it lets go.
const measureLockTries = 3

// measureLockWait is how long measure waits for a one-shot command's lock
// (tests shorten it).
var measureLockWait = reconcile.DefaultLockWait

// recordMeasurement writes m to the state file in stateDir the way every
// other writer does, under the state lock, so that no update is lost and
// none interleaves (an apply that read the state before measure wrote
// would otherwise save it back without the profile, and measure could
// write back a pf token apply just replaced). The lock is held only for
// the read-modify-write; an apply or down holding it is waited for, as
// they wait for each other. macake watch holds the lock for its whole
// life: then measure hands m to the daemon over STATE_DIR/watch.sock, and
// the daemon saves it (and uses it at once). warn hears about a corrupt
// state file, which is rebuilt.
func recordMeasurement(ctx context.Context, stateDir, key string, m state.Profile, warn io.Writer) (viaWatch bool, err error) {
	wait := time.Duration(0) // first find out at once whether watch holds it
	for try := 1; ; try++ {
		lock, err := reconcile.AcquireLock(ctx, stateDir, wait)
		if err == nil {
			defer lock.Release()
			st, err := state.Load(stateDir)
			if err != nil {
				if !errors.Is(err, state.ErrCorrupt) {
					return false, err
				}
				fmt.Fprintf(warn, "warning: %v\n", err)
				if aside, err := state.SetAside(stateDir); err == nil {
					fmt.Fprintf(warn, "warning: a copy of the corrupt state file is kept in %s\n", aside)
				}
			}
			st.RecordMeasurement(key, m)
			return false, state.Save(stateDir, st)
		}
		var locked *reconcile.LockedError
		if !errors.As(err, &locked) || try >= measureLockTries && locked.Holder != reconcile.HolderWatch {
			return false, err
		}
		wait = measureLockWait
		if locked.Holder != reconcile.HolderWatch {
			continue // an apply or down: wait for it as they wait for each other
		}
		err = statusapi.SendMeasurement(ctx, statusapi.SocketPath(stateDir), statusapi.Measurement{Key: key, Profile: m})
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, statusapi.ErrNotRunning) && try < measureLockTries:
			continue // starting or stopping: try the lock again
		}
		pid := ""
		if locked.PID > 0 {
			pid = fmt.Sprintf(" (pid %d)", locked.PID)
		}
		return false, fmt.Errorf("macake watch%s holds the state lock, and handing it the measurement failed: %w", pid, err)
	}
}

// networkQuality is the part of Apple's `networkQuality -c` JSON that
// macake compares with its own measurement.
type networkQuality struct {
	DownloadBitsPerSecond float64 `json:"download_bits_per_second"`
	UploadBitsPerSecond   float64 `json:"upload_bits_per_second"`
	BaseRTTMs             float64 `json:"base_rtt_ms"`
	// Responsiveness is in round trips per minute under load (RPM).
	Responsiveness float64 `json:"responsiveness_rpm"`
	Interface      string  `json:"interface,omitempty"`
}

var errNoNetworkQuality = errors.New("networkQuality not installed")

const networkQualityPath = "/usr/bin/networkQuality"

func runNetworkQuality(ctx context.Context, iface string) (*networkQuality, error) {
	if _, err := os.Stat(networkQualityPath); err != nil {
		return nil, errNoNetworkQuality
	}
	argv := []string{networkQualityPath, "-c"}
	if iface != "" {
		argv = append(argv, "-I", iface)
	}
	cmd := execrun.Command{Argv: argv}
	res, err := execrun.Exec{Timeout: 90 * time.Second}.Run(ctx, cmd)
	if res, err = execrun.Check(cmd, res, err); err != nil {
		return nil, err
	}
	return parseNetworkQuality(res.Stdout)
}

// parseNetworkQuality reads `networkQuality -c` output leniently: Apple
// documents no schema and adds fields between releases, so unknown keys
// are ignored and missing ones left zero. dl_throughput and ul_throughput
// are bits/s, base_rtt is ms, responsiveness (or dl_responsiveness in
// sequential mode) is RPM. A failed run reports error_code.
func parseNetworkQuality(b []byte) (*networkQuality, error) {
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("reading networkQuality output: %w", err)
	}
	num := func(k string) float64 {
		if v, ok := raw[k].(float64); ok {
			return v
		}
		return 0
	}
	if code := num("error_code"); code != 0 {
		return nil, fmt.Errorf("networkQuality failed: error %v (%v)", code, raw["error_domain"])
	}
	nq := &networkQuality{DownloadBitsPerSecond: num("dl_throughput"), UploadBitsPerSecond: num("ul_throughput"), BaseRTTMs: num("base_rtt"), Responsiveness: num("responsiveness")}
	if nq.Responsiveness == 0 {
		nq.Responsiveness = num("dl_responsiveness")
	}
	nq.Interface, _ = raw["interface_name"].(string)
	if nq.DownloadBitsPerSecond == 0 && nq.UploadBitsPerSecond == 0 {
		return nil, errors.New("networkQuality reported no throughput")
	}
	return nq, nil
}
