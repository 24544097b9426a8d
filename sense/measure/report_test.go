// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"encoding/json"
	"flag"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/sense/probe"
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
			if tc.name == "Wi-Fi bloat on upload" && !strings.Contains(got, "at or before the gateway") {
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
		DownLatency: PhaseLatency{Targets: down, Added: probe.LikeForLike(idle, down), Gateway: gwDown, GatewayAdded: one(gwIdle, gwDown)},
		UpLatency:   PhaseLatency{Targets: up, Added: probe.LikeForLike(idle, up), Gateway: gwUp, GatewayAdded: one(gwIdle, gwUp)},
		BothLatency: PhaseLatency{Targets: both, Added: probe.LikeForLike(idle, both), Gateway: gwUp, GatewayAdded: one(gwIdle, gwUp)},
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
	lt := LoadTest{Targets: []netip.Addr{r1, r2}, Gateway: gw}
	return t, lt, res
}

func TestReportGolden(t *testing.T) {
	target, lt, res := sampleResult()
	ep, _ := speedtest.ServerEndpoint("http://198.51.100.10:8080")
	rep := NewReport(target, ep, lt, res)
	rep.Saved = true
	var text strings.Builder
	rep.WriteText(&text, "/var/db/macake")
	js, _ := json.MarshalIndent(rep, "", "  ")
	golden(t, "measure.txt", text.String())
	golden(t, "measure.json", string(js)+"\n")
	var bench strings.Builder
	NewBenchReport(ep, lt, res).WriteText(&bench)
	golden(t, "bench.txt", bench.String())
}

var update = flag.Bool("update", false, "rewrite the golden files")

// golden compares got with testdata/NAME.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
