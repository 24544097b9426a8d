// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
)

// LoadTest is the shared engine of measure and bench: an idle phase, then
// download, then upload, then both at once (the working conditions of the
// IPPM responsiveness draft), with latency probes running throughout, so
// that the latency under load is compared with the same targets' idle
// latency.
type LoadTest struct {
	Endpoint speedtest.Endpoint
	Streams  int
	Idle     time.Duration
	Duration time.Duration
	// Targets are the latency targets compared like for like, each
	// probed as it says (ICMP, a TCP handshake or a UDP echo); Gateway
	// (optional, ICMP) is reported apart, to tell LAN from ISP queueing.
	Targets []shape.Reflector
	Gateway netip.Addr
	// Compare are probes of another kind to some targets' addresses (the
	// TCP probes of a policy's auto reflectors). A second prober runs
	// them beside Targets, so that each kind's added latency can be
	// compared on the same load (LoadResult.Kinds).
	Compare       []shape.Reflector
	ProbeInterval time.Duration
	// Interface, when set, binds the probes and the load's connections
	// to that interface (Target.Bound): a link that does not carry the
	// default route is measured through itself.
	Interface string
	// Stall fails a phase after this long without progress (default 5 s,
	// at most half of Duration).
	Stall time.Duration
	// LostDelay, when positive, makes the latency under load count every
	// probe sent, a lost one as a round trip of the target's idle median
	// plus LostDelay (package score's rule for a score; bench sets it).
	// Zero takes the replies only, as measure's decisions were made on.
	LostDelay time.Duration
	// Progress receives human progress lines (stderr); nil for none.
	Progress io.Writer
	// TTY makes the progress one line rewritten in place; Command names
	// the command in it.
	TTY     bool
	Command string
}

// PhaseLatency is one window's latency, like for like against idle.
type PhaseLatency struct {
	Targets map[netip.Addr]probe.Summary
	Added   probe.Added
	// Sent and Lost count the targets' probes in the window, and those
	// that got no reply.
	Sent, Lost int
	Gateway    probe.Summary
	// GatewayAdded is the gateway's own loaded-minus-idle, per percentile.
	GatewayAdded probe.Added
}

// Loss is the share of the window's probes that got no reply (0 with none
// sent).
func (pl PhaseLatency) Loss() float64 {
	if pl.Sent == 0 {
		return 0
	}
	return float64(pl.Lost) / float64(pl.Sent)
}

// LoadResult is what a LoadTest measured: each direction's throughput,
// and the latency of the idle phase and of each load's steady part.
type LoadResult struct {
	Download, Upload speedtest.Result
	// BothDownload and BothUpload are the two directions loaded at once.
	BothDownload, BothUpload speedtest.Result
	Idle                     map[netip.Addr]probe.Summary
	GatewayIdle              probe.Summary
	DownLatency              PhaseLatency
	UpLatency                PhaseLatency
	BothLatency              PhaseLatency
	// Congestion is the load sockets' TCP congestion control.
	Congestion string
	Stats      probe.Stats
	// Compared holds the Compare probes' own windows, by address.
	Compared ComparedLatency
	// Kinds is each probe kind's latency over the targets probed that
	// way, Targets and Compare together, in shape.ProbeKinds order.
	Kinds []KindLatency
}

// ComparedLatency is the Compare probes' latency per address: idle and
// under each direction's load.
type ComparedLatency struct {
	Idle, Download, Upload map[netip.Addr]probe.Summary
}

// KindLatency is what one probe kind saw: how many targets it had, and
// the latency the load added, like for like, over them.
type KindLatency struct {
	Kind     shape.ProbeKind
	Targets  int
	Download probe.Added
	Upload   probe.Added
}

// probeTimeout is long: a bloated buffer can hold replies for seconds,
// and a reply that arrives is worth more than a loss.
const probeTimeout = 5 * time.Second

// Run runs the test. Any failed or stalled phase fails it, so that a
// partial measurement is never taken for a link's capacity.
func (lt *LoadTest) Run(ctx context.Context) (LoadResult, error) {
	var res LoadResult
	if lt.Stall <= 0 {
		lt.Stall = stallTimeout(lt.Duration)
	}
	targets := slices.Clone(lt.Targets)
	addrs := shape.ReflectorAddrs(lt.Targets)
	if lt.Gateway.IsValid() && !slices.Contains(addrs, lt.Gateway) {
		targets = append(targets, shape.ICMPReflector(lt.Gateway))
	}
	p, err := newProber(targets, lt.ProbeInterval, probeTimeout, lt.Interface)
	if err != nil {
		return res, err
	}
	var pc *probe.Prober
	if len(lt.Compare) > 0 {
		if pc, err = newProber(lt.Compare, lt.ProbeInterval, probeTimeout, lt.Interface); err != nil {
			return res, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var rec, crec probe.Recorder
	var wg sync.WaitGroup
	run := func(p *probe.Prober, rec *probe.Recorder) {
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
	}
	run(p, &rec)
	if pc != nil {
		run(pc, &crec)
	}
	defer wg.Wait()
	defer cancel()

	prog := &progressLine{w: lt.Progress, tty: lt.TTY, cmd: lt.Command}
	defer prog.done()

	// Idle: the first half second is skipped (sockets and ARP warming up).
	idleStart := time.Now()
	if err := prog.wait(ctx, "idle", lt.Idle, func() string { return prog.rtt(&rec, addrs) }); err != nil {
		return res, err
	}
	idleFrom, idleTo := idleStart.Add(min(lt.Idle/4, 500*time.Millisecond)), time.Now()
	res.Idle = rec.Windows(addrs, idleFrom, idleTo)
	compared := shape.ReflectorAddrs(lt.Compare)
	res.Compared.Idle = crec.Windows(compared, idleFrom, idleTo)
	answered := 0
	for _, s := range res.Idle {
		if s.Samples > 0 {
			answered++
		}
	}
	if answered == 0 {
		return res, fmt.Errorf("no latency target answered during the %v idle phase (%s): without a latency baseline there is nothing to compare; check the network, or pass --reflector ADDR", lt.Idle, DescribeTargets(lt.Targets))
	}
	if lt.Gateway.IsValid() {
		res.GatewayIdle = rec.Window(lt.Gateway, idleFrom, idleTo)
	}

	dialer := speedtest.NewDialer()
	if lt.Interface != "" {
		dialer.Control = boundControl(lt.Interface, dialer.Control)
	}
	client := speedtest.NewClient(dialer.DialContext)
	config := func(progress func(time.Duration, float64)) speedtest.Config {
		return speedtest.Config{Endpoint: lt.Endpoint, Client: client, Streams: lt.Streams, Duration: lt.Duration, StallTimeout: lt.Stall,
			Progress: func(el time.Duration, _ int64, bps float64) { progress(el, bps) }}
	}
	for _, dir := range []string{"download", "upload"} {
		cfg := config(func(el time.Duration, bps float64) {
			prog.line(fmt.Sprintf("%s %d/%ds  %s  rtt %s", dir, int(el.Seconds()), int(lt.Duration.Seconds()), shape.FormatApprox(bps), prog.rtt(&rec, addrs)))
		})
		run := speedtest.Download
		if dir == "upload" {
			run = speedtest.Upload
		}
		r, err := run(ctx, cfg)
		if err := phaseFailed(ctx, lt, dir, r, err); err != nil {
			return res, err
		}
		if dir == "download" {
			res.Download = r
		} else {
			res.Upload = r
		}
	}
	if err := lt.both(ctx, &res, config, prog, &rec, addrs); err != nil {
		return res, err
	}
	// Replies to the probes sent at the end of a phase wait behind that
	// phase's queue; give them time to land (the download's land during
	// the upload) before summarising the windows by send time.
	if err := prog.wait(ctx, "draining", time.Second, func() string { return prog.rtt(&rec, addrs) }); err != nil {
		return res, err
	}
	res.Compared.Download = crec.Windows(compared, res.Download.SteadyFrom, res.Download.SteadyTo)
	res.Compared.Upload = crec.Windows(compared, res.Upload.SteadyFrom, res.Upload.SteadyTo)
	bothFrom, bothTo := res.bothSteady()
	for _, ph := range []struct {
		from, to time.Time
		pl       *PhaseLatency
	}{{res.Download.SteadyFrom, res.Download.SteadyTo, &res.DownLatency}, {res.Upload.SteadyFrom, res.Upload.SteadyTo, &res.UpLatency},
		{bothFrom, bothTo, &res.BothLatency}} {
		pl := PhaseLatency{Targets: rec.Windows(addrs, ph.from, ph.to)}
		if lt.LostDelay > 0 {
			for _, a := range addrs {
				if idle := res.Idle[a]; idle.Samples > 0 {
					pl.Targets[a] = rec.WindowCounting(a, ph.from, ph.to, idle.P50+lt.LostDelay)
				}
			}
		}
		for _, s := range pl.Targets {
			pl.Sent += s.Samples + s.Lost
			pl.Lost += s.Lost
		}
		pl.Added = probe.LikeForLike(res.Idle, pl.Targets)
		if lt.Gateway.IsValid() {
			pl.Gateway = rec.Window(lt.Gateway, ph.from, ph.to)
			pl.GatewayAdded = probe.LikeForLike(map[netip.Addr]probe.Summary{lt.Gateway: res.GatewayIdle}, map[netip.Addr]probe.Summary{lt.Gateway: pl.Gateway})
		}
		*ph.pl = pl
	}
	res.Kinds = kindLatencies(*lt, res)
	res.Stats = p.Stats()
	res.Congestion = dialer.Congestion()
	return res, nil
}

// kindLatencies groups the targets' windows by how they were probed and
// compares each group like for like: the latency each kind saw the load
// add, over the same phases.
func kindLatencies(lt LoadTest, res LoadResult) []KindLatency {
	var out []KindLatency
	for _, k := range shape.ProbeKinds {
		idle, down, up := map[netip.Addr]probe.Summary{}, map[netip.Addr]probe.Summary{}, map[netip.Addr]probe.Summary{}
		for _, r := range lt.Targets {
			if r.Kind == k {
				idle[r.Addr], down[r.Addr], up[r.Addr] = res.Idle[r.Addr], res.DownLatency.Targets[r.Addr], res.UpLatency.Targets[r.Addr]
			}
		}
		// A compared address is a target of another kind (an auto
		// reflector's ICMP), so within one kind no address comes twice.
		for _, r := range lt.Compare {
			if r.Kind == k {
				idle[r.Addr], down[r.Addr], up[r.Addr] = res.Compared.Idle[r.Addr], res.Compared.Download[r.Addr], res.Compared.Upload[r.Addr]
			}
		}
		if len(idle) == 0 {
			continue
		}
		kl := KindLatency{Kind: k, Download: probe.LikeForLike(idle, down), Upload: probe.LikeForLike(idle, up)}
		kl.Targets = max(kl.Download.Targets, kl.Upload.Targets)
		out = append(out, kl)
	}
	return out
}

// both loads the link both ways at once: a download and an upload side
// by side, each as long as a phase alone.
func (lt *LoadTest) both(ctx context.Context, res *LoadResult, config func(func(time.Duration, float64)) speedtest.Config, prog *progressLine, rec *probe.Recorder, addrs []netip.Addr) error {
	var mu sync.Mutex
	rates := [2]float64{}
	// Both directions report their rate; the download's reports print
	// the line, so that it ticks once a second, not twice.
	report := func(i int) func(time.Duration, float64) {
		return func(el time.Duration, bps float64) {
			mu.Lock()
			rates[i] = bps
			line := fmt.Sprintf("both %d/%ds  ↓%s ↑%s  rtt %s", int(el.Seconds()), int(lt.Duration.Seconds()),
				shape.FormatApprox(rates[0]), shape.FormatApprox(rates[1]), prog.rtt(rec, addrs))
			mu.Unlock()
			if i == 0 {
				prog.line(line)
			}
		}
	}
	var wg sync.WaitGroup
	var upErr error
	wg.Go(func() { res.BothUpload, upErr = speedtest.Upload(ctx, config(report(1))) })
	r, downErr := speedtest.Download(ctx, config(report(0)))
	wg.Wait()
	res.BothDownload = r
	if err := phaseFailed(ctx, lt, "both-ways download", r, downErr); err != nil {
		return err
	}
	return phaseFailed(ctx, lt, "both-ways upload", res.BothUpload, upErr)
}

// phaseFailed is why a load phase cannot count, or nil: the load failed,
// was interrupted, or moved nothing once its streams were up.
func phaseFailed(ctx context.Context, lt *LoadTest, name string, r speedtest.Result, err error) error {
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("interrupted")
		}
		return fmt.Errorf("%s test failed: %w", name, err)
	}
	if r.BitsPerSecond <= 0 {
		// The load ended before the stall timeout ran out, but nothing
		// moved once the streams were up: a capacity of 0 is not a
		// measurement.
		return fmt.Errorf("%s test failed: no data moved after the first %v of the %v phase (%d bytes in all): %s stalled", name, r.SteadyFrom.Sub(r.Start).Round(100*time.Millisecond), lt.Duration, r.Bytes, lt.Endpoint.Name)
	}
	return nil
}

// bothSteady is the part of the both-ways phase where both directions ran
// at full rate.
func (r LoadResult) bothSteady() (from, to time.Time) {
	from, to = r.BothDownload.SteadyFrom, r.BothDownload.SteadyTo
	if r.BothUpload.SteadyFrom.After(from) {
		from = r.BothUpload.SteadyFrom
	}
	if r.BothUpload.SteadyTo.Before(to) {
		to = r.BothUpload.SteadyTo
	}
	return from, to
}

// BothWindow is how long both directions ran at full rate together.
func (r LoadResult) BothWindow() time.Duration { return steady(r.bothSteady()) }

// stallTimeout is how long a phase of duration d may move no data before
// it fails: 5 s, but at most half the phase, so that a short phase cannot
// end before its stall is noticed and report a capacity of zero.
func stallTimeout(d time.Duration) time.Duration {
	return min(5*time.Second, d/2)
}

// idle is the median over the targets of one idle statistic.
func (r LoadResult) idle(pick func(probe.Summary) time.Duration) time.Duration {
	return medianOf(r.Idle, pick)
}

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

// newProber opens the latency probe, bound to iface unless it is "", with
// a message that says what failed when its sockets are not allowed.
func newProber(targets []shape.Reflector, interval, timeout time.Duration, iface string) (*probe.Prober, error) {
	p, err := probe.New(probe.Config{Reflectors: shape.ReflectorAddrs(targets), Probes: targets, Interval: interval, Timeout: timeout, Interface: iface})
	if err != nil {
		return nil, fmt.Errorf("opening the probes' sockets: %w", err)
	}
	return p, nil
}

// boundControl binds a load socket to iface before the load dialer's own
// settings (then) are applied.
func boundControl(iface string, then func(network, address string, c syscall.RawConn) error) func(network, address string, c syscall.RawConn) error {
	bind := probe.BindControl(iface)
	return func(network, address string, c syscall.RawConn) error {
		if err := bind(network, address, c); err != nil {
			return err
		}
		if then == nil {
			return nil
		}
		return then(network, address, c)
	}
}

// DescribeTargets lists latency targets for people, in their order:
// "1.1.1.1, tcp:9.9.9.9:443".
func DescribeTargets(ts []shape.Reflector) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.String())
	}
	return strings.Join(s, ", ")
}
