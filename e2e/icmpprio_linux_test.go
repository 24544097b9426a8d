// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/sense/measure"
	"github.com/macake/macake/sense/probe"
	"golang.org/x/net/icmp"
)

var (
	prioTrace = flag.String("e2e.prio-trace", "constant", "trace of TestICMPPriority")
	prioISP   = flag.String("e2e.isp", "prio", "TestICMPPriority's ISP: prio (ICMP first) or honest (one queue for all, the control)")
)

// TestICMPPriority is the testbed with an ISP that gives ICMP strict
// priority (netns.PriorityBottleneck): ICMP crosses the bottleneck without
// queueing while every other packet waits in its one-second bfifo. There
// a controller probing its reflectors with ICMP sees a clean link, climbs
// past the capacity and never cuts, so the user's traffic (the
// independent UDP probe, which macake does not exempt) sees the ISP's
// queue. With "auto" reflectors, `macake measure` compares ICMP with TCP
// handshakes to port 443 on the same load, finds that only TCP sees the
// bloat and records tcp in the profile; watch then probes by TCP, sees
// the queue and removes it. Phases: off, ICMP reflectors, auto
// reflectors after the measurement, off again, on the same trace segment.
//
// With -e2e.isp=honest (the control) the ISP queues ICMP like the rest:
// ICMP-only control works, measure keeps the auto reflectors on ICMP, and
// the TCP phase (tcp:R:443 reflectors) shows what the second signal costs
// where the first one works.
func TestICMPPriority(t *testing.T) {
	prio := *prioISP == "prio"
	if !prio && *prioISP != "honest" {
		t.Fatalf("-e2e.isp=%q: want prio or honest", *prioISP)
	}
	sc, err := ParseScenario(*prioTrace, filepath.Join("testdata", "traces"), "", *phaseLength, 0)
	if err != nil {
		t.Fatal(err)
	}
	tr := sc.Trace
	tb := NewTestbed(t, "e2ep", tr)
	if prio {
		first := tr.At(0)
		tb.Download = tb.ISP.PriorityBottleneck("lan0", first.Download, tb.BufferDown)
		tb.Upload = tb.ISP.PriorityBottleneck("up0", first.Upload, tb.BufferUp)
	}
	// Three reflectors listen on 443 (SYN-ACK), three do not (RST): both
	// answers time the path.
	for _, r := range Reflectors[:3] {
		tb.Server.ServeTCP("tcp4", net.JoinHostPort(r, "443"))
	}
	speedURL := tb.startSpeedtest(t)
	m := NewMacake(t, macake(t), tb.Client, ClientDev, ispLAN)
	ctx := context.Background()
	cfg := PhaseConfig{Idle: *idleLength, DownFlows: 4, UpFlows: *upFlows, LostDelay: LostDelay}

	// The premise: under load, ICMP sees nothing and the user's traffic
	// everything. Checked with macake's own prober beside the phases, to
	// an address no policy lists (so macake never exempts it).
	icmpSeen := tb.icmpBeside(t)

	icmpOn, secondOn, wantKind := "watch, ICMP reflectors", "watch, auto reflectors (measure chose tcp)", "tcp"
	secondPolicy := AutoratePolicy(tr, config.LawMacake, autoReflectors(Reflectors, 443))
	if !prio {
		secondOn, wantKind = "watch, TCP reflectors (tcp:R:443)", "icmp"
		secondPolicy = AutoratePolicy(tr, config.LawMacake, tcpReflectors(Reflectors, 443))
	}
	run := Run{Trace: tr}
	var icmpWindows []phaseWindow
	phase := func(name string, s Shaper) {
		t.Helper()
		ph, err := tb.RunPhase(ctx, name, s, tr, cfg)
		if err != nil {
			t.Fatalf("phase %q: %v", name, err)
		}
		w := icmpSeen(ph)
		icmpWindows = append(icmpWindows, w)
		t.Logf("%s: goodput %.2f Mbit/s, probe idle p50 %v, loaded p50 %v p90 %v; ICMP beside: idle p50 %v, loaded p50 %v",
			name, ph.Goodput/1e6, ph.Idle.P50, ph.Loaded.P50, ph.Loaded.P90, w.idle, w.loaded)
		run.Phases = append(run.Phases, ph)
	}
	watch := newWatchShaper(m, tb)
	phase("off", nil)
	m.SetPolicy(t, "e2e", AutoratePolicy(tr, config.LawMacake, Reflectors))
	phase(icmpOn, watch)
	icmpOutput := watch.Output()

	// measure, unshaped, with the auto reflectors.
	m.SetPolicy(t, "e2e", AutoratePolicy(tr, config.LawMacake, autoReflectors(Reflectors, 443)))
	res, err := m.Run(ctx, 2*time.Minute, "measure", "--server", speedURL, "--idle", "2s", "--duration", "6s", "--json")
	if err != nil || res.Code != 0 {
		t.Fatalf("macake measure: %v\n%s", err, res)
	}
	var rep measure.Report
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("measure's report: %v\n%s", err, res.Stdout)
	}
	t.Logf("measure chose %q: %s", rep.ProbeKind, rep.Verdict)
	if rep.ProbeKind != wantKind || !rep.Saved {
		t.Fatalf("measure chose %q (saved %v): want %s, saved; report:\n%s", rep.ProbeKind, rep.Saved, wantKind, res.Stdout)
	}
	// measure's last phase (upload) leaves the ISP's queue full; the
	// next phase must start from an idle link.
	if err := tb.drain(ctx, run.Phases[0].Idle.P90+2*time.Millisecond, time.Now()); err != nil {
		t.Fatalf("after measure: %v", err)
	}
	m.SetPolicy(t, "e2e", secondPolicy)
	phase(secondOn, watch)
	phase("off again", nil)

	var table strings.Builder
	if !prio {
		table.WriteString("The control: the same testbed with an ISP that queues ICMP like everything else.\n\n")
	}
	if err := run.WriteTable(&table, secondOn); err != nil {
		t.Fatal(err)
	}
	vi, err := run.Compare(icmpOn)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&table, "%q kept %.1f %% of the goodput and cut the median added delay by %.0f %% and the p90 by %.0f %%.\n",
		icmpOn, 100*vi.GoodputKept, 100*vi.P50Cut, 100*vi.P90Cut)
	table.WriteString("\nICMP beside the phases (to an address no policy exempts), loaded minus idle p50: ")
	for i, w := range icmpWindows {
		fmt.Fprintf(&table, "%s %s; ", run.Phases[i].Name, ms(w.loaded-w.idle))
	}
	table.WriteString("\n\n`macake measure` (unshaped, auto reflectors), the latency each kind saw the load add (p50): ")
	for _, k := range rep.ProbeKinds {
		fmt.Fprintf(&table, "%s download %s, upload %s; ", k.Kind, usOrDash(k.Download.P50), usOrDash(k.Upload.P50))
	}
	fmt.Fprintf(&table, "chose %s.\n", rep.ProbeKind)
	t.Logf("\n%s", table.String())
	if *reportFile != "" {
		appendReport(t, "isp "+*prioISP+": "+tr.Name, table.String(), cfg)
	}

	// The second signal works (TestOffOnOff's bar), on either ISP.
	v2 := meetsTheBar(t, run, secondOn)
	off := icmpWindows[0]
	switch {
	case prio && off.loaded-off.idle > 20*time.Millisecond:
		t.Errorf("ICMP saw %v added under the unshaped load: the ISP does not prioritise ICMP", off.loaded-off.idle)
	case !prio && off.loaded-off.idle < 100*time.Millisecond:
		t.Errorf("ICMP saw only %v added under the unshaped load: the honest ISP should queue it", off.loaded-off.idle)
	case prio && (vi.OnAdded.P90 < 3*v2.OnAdded.P90 || vi.OnAdded.P90 < 200*time.Millisecond):
		// ICMP-only control fails: blind to the queue, it climbs past
		// the capacity and the ISP's queue builds (in a short phase it
		// starts below the capacity, so the median is partly clean; the
		// p90 is not).
		t.Errorf("%s: added p90 %v, against %v with TCP: ICMP-only control was not supposed to see this queue", icmpOn, vi.OnAdded.P90, v2.OnAdded.P90)
	case !prio && vi.P90Ratio > 0.5:
		t.Errorf("%s on an honest ISP: added p90 %v is more than half of the unshaped %v", icmpOn, vi.OnAdded.P90, vi.OffAdded.P90)
	}
	if t.Failed() {
		t.Logf("macake watch (ICMP):\n%s\nmacake watch (second):\n%s", icmpOutput, watch.Output())
	}
}

// startSpeedtest serves macake's speed test on the bulk server's address
// and returns its URL.
func (t *Testbed) startSpeedtest(tb *testing.T) string {
	tb.Helper()
	ln, err := t.Server.Listen(speedtest.ListenConfig(), "tcp4", net.JoinHostPort(serverAddr, "8080"))
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: speedtest.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// usOrDash prints a JSON latency in microseconds.
func usOrDash(us *int64) string {
	if us == nil {
		return "-"
	}
	return ms(time.Duration(*us) * time.Microsecond)
}

// autoReflectors returns auto:R:port for each address.
func autoReflectors(addrs []string, port int) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = fmt.Sprintf("auto:%s:%d", a, port)
	}
	return out
}

// tcpReflectors returns tcp:R:port for each address.
func tcpReflectors(addrs []string, port int) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = fmt.Sprintf("tcp:%s:%d", a, port)
	}
	return out
}

// phaseWindow is what ICMP saw in a phase's idle and loaded windows (p50).
type phaseWindow struct{ idle, loaded time.Duration }

// icmpBeside probes the seventh server address, which no policy lists (so
// macake never exempts it), with ICMP from the client for the whole test,
// and returns what it saw in a phase's windows: the ISP's priority, not
// macake's exemption, is what keeps it clean.
func (t *Testbed) icmpBeside(tb *testing.T) func(Phase) phaseWindow {
	tb.Helper()
	target := netip.MustParseAddr(probeAddr)
	p, err := probe.New(probe.Config{Reflectors: []netip.Addr{target}, Interval: 100 * time.Millisecond, Timeout: 5 * time.Second,
		Socket: probe.SocketRaw, NoTimestamps: true, Listen: func(network, address string) (net.PacketConn, error) {
			var pc net.PacketConn
			err := t.Client.Do(func() (err error) {
				pc, err = icmp.ListenPacket(network, address)
				return err
			})
			return pc, err
		}})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var rec probe.Recorder
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	go func() {
		for s := range p.Samples() {
			rec.Add(s)
		}
	}()
	tb.Cleanup(func() { cancel(); <-done })
	return func(ph Phase) phaseWindow {
		return phaseWindow{idle: rec.Window(target, ph.IdleFrom, ph.IdleTo).P50, loaded: rec.Window(target, ph.LoadFrom, ph.LoadTo).P50}
	}
}
