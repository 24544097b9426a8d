// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
)

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func TestVerdictPlacesTheQueue(t *testing.T) {
	pl := func(added, gw time.Duration) PhaseLatency {
		return PhaseLatency{Added: probe.Added{P50: added, P90: added + ms(20), Targets: 3}, GatewayAdded: probe.Added{P50: gw, P90: gw, Targets: 1}}
	}
	for _, tc := range []struct {
		name     string
		down, up PhaseLatency
		gw       bool
		want     string
	}{
		{"clean", pl(ms(2), 0), pl(ms(1), 0), true, "No significant bufferbloat: load adds at most +2.0ms"},
		{"quieter under load", pl(ms(-0.3), 0), pl(ms(-1), 0), true, "No significant bufferbloat: load adds at most +0.0ms at the median."},
		{"ISP bloat on download", pl(ms(400), ms(0.5)), pl(ms(30), 0), true, "a download adds +400.0ms at the median and +420.0ms at p90; the gateway stayed at +0.5ms, so the queue builds beyond the gateway"},
		{"Wi-Fi bloat on upload", pl(ms(10), ms(8)), pl(ms(80), ms(70)), true, "an upload adds +80.0ms"},
		{"gateway unknown", pl(ms(100), 0), pl(ms(10), 0), false, "where the queue builds is unknown"},
		{"nothing answered", PhaseLatency{Added: probe.Added{P50: -1, P90: -1}}, PhaseLatency{Added: probe.Added{P50: -1, P90: -1}}, true, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := verdict(tc.down, tc.up, tc.gw)
			if !strings.Contains(got, tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if tc.name == "Wi-Fi bloat on upload" && !strings.Contains(got, "at or before the gateway: this machine, Wi-Fi or the LAN") {
				t.Errorf("%q does not blame the LAN", got)
			}
		})
	}
}

// sampleResult is a measurement of a 50/10 Mbit/s link with ISP bloat.
func sampleResult() (Target, LoadTest, LoadResult) {
	r1, r2, gw := netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("9.9.9.9"), netip.MustParseAddr("192.168.1.1")
	sum := func(p50, p90 float64) probe.Summary {
		return probe.Summary{Samples: 30, P50: ms(p50), P90: ms(p90), TM95: ms(p50 + (p90-p50)/3)}
	}
	idle := map[netip.Addr]probe.Summary{r1: sum(20, 23), r2: sum(30, 34)}
	down := map[netip.Addr]probe.Summary{r1: sum(420, 480), r2: sum(428, 492)}
	up := map[netip.Addr]probe.Summary{r1: sum(60, 75), r2: sum(72, 90)}
	both := map[netip.Addr]probe.Summary{r1: sum(445, 510), r2: sum(452, 530)}
	gwIdle, gwDown, gwUp := sum(1.2, 2), sum(1.5, 2.6), sum(1.3, 2.2)
	one := func(a, b probe.Summary) probe.Added {
		return probe.LikeForLike(map[netip.Addr]probe.Summary{gw: a}, map[netip.Addr]probe.Summary{gw: b})
	}
	res := LoadResult{
		Idle: idle, GatewayIdle: gwIdle, Congestion: "cubic",
		DownLatency: PhaseLatency{Targets: down, Added: probe.LikeForLike(idle, down), Gateway: gwDown, GatewayAdded: one(gwIdle, gwDown), Sent: 160, Lost: 4},
		UpLatency:   PhaseLatency{Targets: up, Added: probe.LikeForLike(idle, up), Gateway: gwUp, GatewayAdded: one(gwIdle, gwUp), Sent: 160},
		BothLatency: PhaseLatency{Targets: both, Added: probe.LikeForLike(idle, both), Gateway: gwUp, GatewayAdded: one(gwIdle, gwUp), Sent: 160, Lost: 1},
	}
	// Each load 10 s, the first 2.5 s of it warm-up.
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, r := range []*speedtest.Result{&res.Download, &res.Upload, &res.BothDownload, &res.BothUpload} {
		start := t0.Add(time.Duration(min(i, 2)) * 10 * time.Second)
		r.Start, r.SteadyFrom, r.SteadyTo = start, start.Add(2500*time.Millisecond), start.Add(10*time.Second)
	}
	res.BothDownload.BitsPerSecond, res.BothUpload.BitsPerSecond = 44_100_000, 8_900_000
	res.Download.BitsPerSecond, res.Download.Streams, res.Download.Bytes = 47_812_000, 8, 59_765_000
	res.Upload.BitsPerSecond, res.Upload.Streams, res.Upload.Bytes = 9_563_000, 8, 11_953_000
	mac, _ := net.ParseMAC("74:24:9f:00:00:01")
	t := Target{Link: "home", Interface: "en0", Facts: linkfacts.InterfaceFacts{Name: "en0", Up: true, GatewayIP: gw, GatewayMAC: config.HardwareAddr(mac)}}
	lt := LoadTest{Targets: shape.ICMPReflectors([]netip.Addr{r1, r2}), Gateway: gw}
	res.Kinds = kindLatencies(lt, res)
	return t, lt, res
}

// icmpPriorityResult is the same link behind an ISP that gives ICMP
// strict priority, measured with two auto reflectors: their ICMP sees
// nothing, their TCP handshakes the whole queue.
func icmpPriorityResult() (Target, LoadTest, LoadResult) {
	t, lt, res := sampleResult()
	r1, r2 := netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("9.9.9.9")
	sum := func(p50, p90 float64) probe.Summary { return probe.Summary{Samples: 30, P50: ms(p50), P90: ms(p90)} }
	flat := map[netip.Addr]probe.Summary{r1: sum(21, 24), r2: sum(31, 35)}
	res.DownLatency.Targets, res.UpLatency.Targets = flat, flat
	res.DownLatency.Added, res.UpLatency.Added = probe.LikeForLike(res.Idle, flat), probe.LikeForLike(res.Idle, flat)
	res.Compared = ComparedLatency{
		Idle:     map[netip.Addr]probe.Summary{r1: sum(20, 23), r2: sum(30, 34)},
		Download: map[netip.Addr]probe.Summary{r1: sum(420, 480), r2: sum(428, 492)},
		Upload:   map[netip.Addr]probe.Summary{r1: sum(60, 75), r2: sum(72, 90)},
	}
	for _, a := range []netip.Addr{r1, r2} {
		ar, _ := config.ParseReflector("auto:" + netip.AddrPortFrom(a, 443).String())
		t.Reflectors = append(t.Reflectors, ar)
	}
	lt.Targets, lt.Compare = t.Probes(), t.Alternatives()
	res.Kinds = kindLatencies(lt, res)
	return t, lt, res
}

// TestReportComparesProbeKinds: behind an ISP that prioritises ICMP,
// measure sees the bloat only with TCP, says so, chooses TCP for the auto
// reflectors and saves that choice in the profile.
func TestReportComparesProbeKinds(t *testing.T) {
	target, lt, res := icmpPriorityResult()
	ep, _ := speedtest.ServerEndpoint("http://198.51.100.10:8080")
	rep := NewReport(target, ep, lt, res)
	var text strings.Builder
	rep.WriteText(&text, "/var/db/macake")
	js, _ := json.MarshalIndent(rep, "", "  ")
	golden.Check(t, "testdata/measure-icmp-priority.txt", []byte(text.String()), "what `macake measure` prints")
	golden.Check(t, "testdata/measure-icmp-priority.json", append(js, '\n'), "the measure report's JSON")
	if rep.ProbeKind != "tcp" || !strings.HasPrefix(rep.Verdict, "Bufferbloat: a download adds +399.0ms") {
		t.Errorf("probe kind %q, verdict %q: want tcp, and the verdict from the TCP probes", rep.ProbeKind, rep.Verdict)
	}
	p, err := rep.Profile(time.Now())
	if err != nil || p.ProbeKind != "tcp" {
		t.Errorf("profile %+v, %v: want probe kind tcp saved", p, err)
	}
	// Without auto reflectors nothing is compared, and nothing chosen.
	pt, plt, pres := sampleResult()
	plain := NewReport(pt, ep, plt, pres)
	if p, _ := plain.Profile(time.Now()); p.ProbeKind != "" || plain.ProbeKind != "" {
		t.Errorf("a measurement that compared nothing chose %q", p.ProbeKind)
	}
}

func TestChooseProbeKind(t *testing.T) {
	k := func(kind shape.ProbeKind, down, up float64, targets int) KindLatency {
		return KindLatency{Kind: kind, Targets: targets, Download: probe.Added{P50: ms(down), Targets: targets}, Upload: probe.Added{P50: ms(up), Targets: targets}}
	}
	for _, c := range []struct {
		name  string
		kinds []KindLatency
		want  shape.ProbeKind
	}{
		{"ICMP prioritised", []KindLatency{k(shape.ProbeICMP, 1, 0.5, 6), k(shape.ProbeTCP, 400, 40, 6)}, shape.ProbeTCP},
		{"ICMP policed: it sees a little", []KindLatency{k(shape.ProbeICMP, 30, 5, 6), k(shape.ProbeTCP, 240, 20, 6)}, shape.ProbeTCP},
		{"both see it", []KindLatency{k(shape.ProbeICMP, 380, 40, 6), k(shape.ProbeTCP, 400, 42, 6)}, shape.ProbeICMP},
		{"only upload bloat, ICMP blind", []KindLatency{k(shape.ProbeICMP, 0.4, 0.6, 6), k(shape.ProbeTCP, 1, 90, 6)}, shape.ProbeTCP},
		{"no bloat at all", []KindLatency{k(shape.ProbeICMP, 1, 1, 6), k(shape.ProbeTCP, 3, 2, 6)}, shape.ProbeICMP},
		{"TCP unanswered", []KindLatency{k(shape.ProbeICMP, 1, 1, 6)}, shape.ProbeICMP},
		{"ICMP unanswered", []KindLatency{k(shape.ProbeTCP, 200, 1, 4)}, shape.ProbeTCP},
	} {
		if got, _, _ := chooseProbeKind(c.kinds); got != c.want {
			t.Errorf("%s: chose %s, want %s", c.name, got, c.want)
		}
	}
}

func TestReportGolden(t *testing.T) {
	target, lt, res := sampleResult()
	ep, _ := speedtest.ServerEndpoint("http://198.51.100.10:8080")
	rep := NewReport(target, ep, lt, res)
	rep.Saved = true
	var text strings.Builder
	rep.WriteText(&text, "/var/db/macake")
	js, _ := json.MarshalIndent(rep, "", "  ")
	golden.Check(t, "testdata/measure.txt", []byte(text.String()), "what `macake measure` prints; docs/USAGE.md shows it")
	golden.Check(t, "testdata/measure.json", append(js, '\n'), "the measure report's JSON")
	var bench strings.Builder
	NewBenchReport(ep, lt, res).WriteText(&bench)
	golden.Check(t, "testdata/bench.txt", []byte(bench.String()), "what `macake bench` prints")
}
