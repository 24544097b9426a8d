// SPDX-License-Identifier: Apache-2.0

package main

// Helpers shared by monitor, measure and bench: which link and reflectors
// to use, the latency probe, the load test, and human formatting.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/measure"
	"github.com/macake/macake/sense/probe"
)

// addrList is a repeatable flag of IP addresses (--reflector).
type addrList []netip.Addr

func (a *addrList) String() string {
	var s []string
	for _, x := range *a {
		s = append(s, x.String())
	}
	return strings.Join(s, ",")
}

func (a *addrList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		ip, err := netip.ParseAddr(strings.TrimSpace(part))
		if err != nil || ip.IsUnspecified() || ip.IsMulticast() {
			return fmt.Errorf("%q is not a unicast IP address (reflectors are IP literals, e.g. 1.1.1.1)", part)
		}
		*a = append(*a, ip.Unmap())
	}
	return nil
}

// resolveTarget finds what to measure (see measure.ResolveTarget) from the
// network's facts and the policies in the config directory. With linkName
// that policy must exist, and only then must the directory be valid; its
// errors name the flag.
func resolveTarget(e *env, linkName string, reflectors []netip.Addr) (measure.Target, error) {
	t := measure.Target{ProbeInterval: probe.DefaultInterval}
	facts, err := linkfacts.Read(e.ctx, e.getenv)
	if err != nil {
		return t, fmt.Errorf("reading the network's facts: %w", err)
	}
	var links []config.Link
	var lerr error
	if linkName != "" || e.configDirSet || dirExists(e.configDir) {
		opts := config.LoadOptions{SkipOwnershipCheck: e.euid() != 0}
		links, _, lerr = config.Load(e.configDir, opts)
	}
	var named *config.Link
	if linkName != "" {
		i := slices.IndexFunc(links, func(l config.Link) bool { return l.Name == linkName })
		switch {
		case i < 0 && lerr != nil:
			return t, fmt.Errorf("--link %s: %w", linkName, lerr)
		case i < 0:
			return t, fmt.Errorf("--link %s: no such policy in %s (see macake links)", linkName, e.configDir)
		}
		named = &links[i]
	}
	t, err = measure.ResolveTarget(facts, links, named, reflectors)
	if err != nil && named != nil {
		err = fmt.Errorf("--link %s: %w", linkName, err)
	}
	return t, err
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// newProber opens the latency probe with a message that says what to do
// when ICMP sockets are not allowed.
func newProber(targets []netip.Addr, interval, timeout time.Duration) (*probe.Prober, error) {
	p, err := probe.New(probe.Config{Reflectors: targets, Interval: interval, Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("opening ICMP sockets: %w", err)
	}
	return p, nil
}

// resolveHost returns one address of host (an IP literal or a name),
// IPv4 preferred.
func resolveHost(ctx context.Context, host string) (netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap(), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("resolving %s: %v", host, err)
	}
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			return ip.Unmap(), nil
		}
	}
	return ips[0], nil
}

// loadTest is the shared engine of measure and bench: an idle phase, then
// download, then upload, with latency probes running throughout.
type loadTest struct {
	Endpoint speedtest.Endpoint
	Streams  int
	Idle     time.Duration
	Duration time.Duration
	// Targets are the latency targets compared like for like; Gateway
	// (optional) is reported apart, to tell LAN from ISP queueing.
	Targets       []netip.Addr
	Gateway       netip.Addr
	ProbeInterval time.Duration
	// Stall fails a phase after this long without progress (default
	// stallTimeout(Duration)).
	Stall time.Duration
	// Progress receives human progress lines (stderr); nil for none.
	Progress io.Writer
	TTY      bool
	Command  string
}

// phaseLatency is one window's latency, like for like against idle.
type phaseLatency struct {
	Targets map[netip.Addr]probe.Summary
	Added   probe.Added
	Gateway probe.Summary
	// GatewayAdded is the gateway's own loaded-minus-idle, per percentile.
	GatewayAdded probe.Added
}

type loadTestResult struct {
	Download, Upload speedtest.Result
	Idle             map[netip.Addr]probe.Summary
	GatewayIdle      probe.Summary
	DownLatency      phaseLatency
	UpLatency        phaseLatency
	Congestion       string
	Stats            probe.Stats
}

// probeTimeout is long: a bloated buffer can hold replies for seconds,
// and a reply that arrives is worth more than a loss.
const probeTimeout = 5 * time.Second

func (lt *loadTest) run(ctx context.Context) (loadTestResult, error) {
	var res loadTestResult
	if lt.Stall <= 0 {
		lt.Stall = stallTimeout(lt.Duration)
	}
	targets := append([]netip.Addr(nil), lt.Targets...)
	if lt.Gateway.IsValid() && !contains(targets, lt.Gateway) {
		targets = append(targets, lt.Gateway)
	}
	p, err := newProber(targets, lt.ProbeInterval, probeTimeout)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var rec probe.Recorder
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.Run(ctx)
	}()
	go func() {
		for s := range p.Samples() {
			rec.Add(s)
		}
	}()
	defer wg.Wait()
	defer cancel()

	prog := &progressLine{w: lt.Progress, tty: lt.TTY, cmd: lt.Command}
	defer prog.done()

	// Idle: the first half second is skipped (sockets and ARP warming up).
	idleStart := time.Now()
	if err := prog.wait(ctx, "idle", lt.Idle, func() string { return prog.rtt(&rec, lt.Targets) }); err != nil {
		return res, err
	}
	idleFrom, idleTo := idleStart.Add(min(lt.Idle/4, 500*time.Millisecond)), time.Now()
	res.Idle = rec.Windows(lt.Targets, idleFrom, idleTo)
	answered := 0
	for _, s := range res.Idle {
		if s.Samples > 0 {
			answered++
		}
	}
	if answered == 0 {
		return res, fmt.Errorf("no latency target answered during the %v idle phase (%s): without a latency baseline there is nothing to compare; check the network, or pass --reflector ADDR", lt.Idle, describeTargets(lt.Targets))
	}
	if lt.Gateway.IsValid() {
		res.GatewayIdle = rec.Window(lt.Gateway, idleFrom, idleTo)
	}

	dialer := speedtest.NewDialer()
	client := speedtest.NewClient(dialer.DialContext)
	for _, dir := range []string{"download", "upload"} {
		cfg := speedtest.Config{Endpoint: lt.Endpoint, Client: client, Streams: lt.Streams, Duration: lt.Duration, StallTimeout: lt.Stall,
			Progress: func(el time.Duration, _ int64, bps float64) {
				prog.line(fmt.Sprintf("%s %d/%ds  %s  rtt %s", dir, int(el.Seconds()), int(lt.Duration.Seconds()), humanRate(bps), prog.rtt(&rec, lt.Targets)))
			}}
		run := speedtest.Download
		if dir == "upload" {
			run = speedtest.Upload
		}
		r, err := run(ctx, cfg)
		if err != nil {
			if ctx.Err() != nil {
				return res, errors.New("interrupted")
			}
			return res, fmt.Errorf("%s test failed: %w", dir, err)
		}
		if r.BitsPerSecond <= 0 {
			// The load ended before the stall timeout ran out, but nothing
			// moved once the streams were up: a capacity of 0 is not a
			// measurement.
			return res, fmt.Errorf("%s test failed: no data moved after the first %v of the %v phase (%d bytes in all): %s stalled", dir, r.SteadyFrom.Sub(r.Start).Round(100*time.Millisecond), lt.Duration, r.Bytes, lt.Endpoint.Name)
		}
		if dir == "download" {
			res.Download = r
		} else {
			res.Upload = r
		}
	}
	// Replies to the probes sent at the end of a phase wait behind that
	// phase's queue; give them time to land (the download's land during
	// the upload) before summarising the windows by send time.
	if err := prog.wait(ctx, "draining", time.Second, func() string { return prog.rtt(&rec, lt.Targets) }); err != nil {
		return res, err
	}
	for _, ph := range []struct {
		r  speedtest.Result
		pl *phaseLatency
	}{{res.Download, &res.DownLatency}, {res.Upload, &res.UpLatency}} {
		pl := phaseLatency{Targets: rec.Windows(lt.Targets, ph.r.SteadyFrom, ph.r.SteadyTo)}
		pl.Added = probe.LikeForLike(res.Idle, pl.Targets)
		if lt.Gateway.IsValid() {
			pl.Gateway = rec.Window(lt.Gateway, ph.r.SteadyFrom, ph.r.SteadyTo)
			pl.GatewayAdded = probe.LikeForLike(map[netip.Addr]probe.Summary{lt.Gateway: res.GatewayIdle}, map[netip.Addr]probe.Summary{lt.Gateway: pl.Gateway})
		}
		*ph.pl = pl
	}
	res.Stats = p.Stats()
	res.Congestion = dialer.Congestion()
	return res, nil
}

// stallTimeout is how long a phase of duration d may move no data before
// it fails: 5 s, but at most half the phase, so that a short phase cannot
// end before its stall is noticed and report a capacity of zero.
func stallTimeout(d time.Duration) time.Duration {
	return min(5*time.Second, d/2)
}

func contains(list []netip.Addr, a netip.Addr) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

func describeTargets(ts []netip.Addr) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.String())
	}
	return strings.Join(s, ", ")
}

// progressLine writes progress to stderr: one updating line on a terminal,
// otherwise a line at most every 5 s.
type progressLine struct {
	w     io.Writer
	tty   bool
	cmd   string
	last  time.Time
	dirty bool
}

func (p *progressLine) line(s string) {
	if p.w == nil {
		return
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s: %s", p.cmd, s)
		p.dirty = true
		return
	}
	if time.Since(p.last) >= 5*time.Second {
		fmt.Fprintf(p.w, "%s: %s\n", p.cmd, s)
		p.last = time.Now()
	}
}

func (p *progressLine) done() {
	if p.w != nil && p.tty && p.dirty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// wait sleeps d, reporting progress every 250 ms.
func (p *progressLine) wait(ctx context.Context, phase string, d time.Duration, detail func() string) error {
	end := time.Now().Add(d)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return errors.New("interrupted")
		case <-t.C:
			p.line(fmt.Sprintf("%s %d/%ds  rtt %s", phase, int((d - time.Until(end)).Seconds()), int(d.Seconds()), detail()))
		}
	}
	return nil
}

// rtt is the median RTT over the last second, across targets.
func (p *progressLine) rtt(rec *probe.Recorder, targets []netip.Addr) string {
	now := time.Now()
	var all []time.Duration
	for _, t := range targets {
		if s := rec.Window(t, now.Add(-1500*time.Millisecond), now); s.Samples > 0 {
			all = append(all, s.P50)
		}
	}
	if len(all) == 0 {
		return "-"
	}
	return humanDuration(probe.Percentile(all, 50))
}

// humanRate formats bits per second with SI units and one decimal:
// "48.2 Mbit/s", "950 kbit/s".
func humanRate(bps float64) string {
	units := []struct {
		div  float64
		name string
	}{{1e9, "Gbit/s"}, {1e6, "Mbit/s"}, {1e3, "kbit/s"}}
	for _, u := range units {
		if bps >= u.div {
			v := bps / u.div
			if v >= 100 {
				return fmt.Sprintf("%.0f %s", v, u.name)
			}
			return fmt.Sprintf("%.1f %s", v, u.name)
		}
	}
	return fmt.Sprintf("%.0f bit/s", math.Max(bps, 0))
}

// humanDuration formats a latency with 0.1 ms resolution: "12.3ms",
// "0.1ms", "1.25s"; "-" for a missing value (-1).
func humanDuration(d time.Duration) string {
	if d == -1 {
		return "-"
	}
	if d < 0 {
		return "-" + humanDuration(-d)
	}
	if d >= time.Second {
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// signedDuration is humanDuration with a sign: "+412.0ms", "-0.3ms",
// "+0.0ms".
func signedDuration(d time.Duration) string {
	s := humanDuration(d.Abs())
	if d < 0 && s != "0.0ms" {
		return "-" + s
	}
	return "+" + s
}

// jsonMicros converts for JSON: integer microseconds, null when missing
// (the -1 of probe.Percentile).
func jsonMicros(d time.Duration) *int64 {
	if d == -1 {
		return nil
	}
	v := d.Microseconds()
	return &v
}
