// SPDX-License-Identifier: Apache-2.0

package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/controller"
	"github.com/macake/macake/metrics"
	"github.com/macake/macake/shape"
)

var fixedNow = time.Date(2026, 3, 1, 12, 0, 0, 500_000_000, time.UTC)

func newMetrics() *metrics.Metrics {
	return metrics.New(metrics.Options{Version: "1.2.3", Commit: "abc1234", Now: func() time.Time { return fixedNow }})
}

// gatherer reads m's exposition with the Prometheus client's own parser:
// what a scraper sees, as the client library's families.
func gatherer(m *metrics.Metrics) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		var b strings.Builder
		if err := m.WriteText(&b); err != nil {
			return nil, err
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		byName, err := parser.TextToMetricFamilies(strings.NewReader(b.String()))
		if err != nil {
			return nil, fmt.Errorf("%w\n%s", err, b.String())
		}
		out := make([]*dto.MetricFamily, 0, len(byName))
		for _, f := range byName {
			out = append(out, f)
		}
		slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
		return out, nil
	})
}

// serve starts the endpoint on a free loopback port and returns its base
// URL; the server stops when the test ends.
func serve(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	ln, err := metrics.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeListener: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// A daemon's worth of updates, scraped over a real loopback connection:
// names, labels, values and help text as Prometheus sees them.
func TestScrapeOverLoopback(t *testing.T) {
	m := newMetrics()
	wan := m.Link("wan")
	down, up := wan.Direction(shape.Download), wan.Direction(shape.Upload)
	down.SetRateBounds(25_000_000, 400_000_000)
	down.RateChanged(260_000_000, 250_000_000, false) // a decay step
	down.RateChanged(250_000_000, 187_500_000, true)
	down.SetAchievedRate(180_000_000)
	down.SetLoad(0.96)
	down.SetDelay(12500*time.Microsecond, 42*time.Millisecond)
	down.SetBufferbloatSamples(4)
	up.RateChanged(20_000_000, 20_800_000, false)
	up.RateChanged(20_800_000, 21_632_000, false)
	wan.SetState("stalled")
	wan.SetState("running")
	wan.SetState("sleeping")
	wan.SetEngaged(false)
	r := wan.Reflector(netip.MustParseAddr("1.1.1.1"))
	r.Sample(62500 * time.Microsecond) // binary fractions: an exact sum
	r.Sample(125 * time.Millisecond)
	r.Lost()
	m.Reconciled(0, 3*time.Millisecond, nil)
	m.Reconciled(2, 40*time.Millisecond, nil)
	m.Reconciled(1, 2*time.Second, errors.New("dnctl: exit status 1"))
	m.DriftRepaired("shaper_missing")
	m.DriftRepaired("shaper_missing")
	m.LinkChanged()
	m.SetConfigErrors(1)

	url := serve(t, m) + "/metrics"
	expected := `
# HELP macake_achieved_rate_bits_per_second Traffic actually carried, from the interface byte counters, in bit/s.
# TYPE macake_achieved_rate_bits_per_second gauge
macake_achieved_rate_bits_per_second{direction="download",link="wan"} 1.8e+08
macake_achieved_rate_bits_per_second{direction="upload",link="wan"} 0
# HELP macake_bufferbloat_samples Delayed samples (delay delta above the threshold) in the current detection window; bufferbloat when it reaches the vote threshold.
# TYPE macake_bufferbloat_samples gauge
macake_bufferbloat_samples{direction="download",link="wan"} 4
macake_bufferbloat_samples{direction="upload",link="wan"} 0
# HELP macake_build_info Always 1; the labels say which macake is running.
# TYPE macake_build_info gauge
macake_build_info{commit="abc1234",goversion="` + runtime.Version() + `",version="1.2.3"} 1
# HELP macake_config_errors Policy file errors in force (the daemon runs on with the last good policy or none for those links).
# TYPE macake_config_errors gauge
macake_config_errors 1
# HELP macake_controller_state 1 for the controller's current state (running, idle, sleeping, stalled), 0 for the others.
# TYPE macake_controller_state gauge
macake_controller_state{link="wan",state="idle"} 0
macake_controller_state{link="wan",state="running"} 0
macake_controller_state{link="wan",state="sleeping"} 1
macake_controller_state{link="wan",state="stalled"} 0
# HELP macake_delay_baseline_seconds One-way delay to the reflectors when the link is idle (the lowest reflector baseline); NaN until the first reply.
# TYPE macake_delay_baseline_seconds gauge
macake_delay_baseline_seconds{direction="download",link="wan"} 0.0125
macake_delay_baseline_seconds{direction="upload",link="wan"} NaN
# HELP macake_delay_delta_seconds One-way delay above the baseline: the queueing delay the controller steers by (mean of the reflectors' smoothed deltas); NaN until the first reply.
# TYPE macake_delay_delta_seconds gauge
macake_delay_delta_seconds{direction="download",link="wan"} 0.042
macake_delay_delta_seconds{direction="upload",link="wan"} NaN
# HELP macake_drift_repairs_total Changes made by someone else to what macake owns, put back, by kind (rules_missing, rules_changed, shaper_missing, shaper_changed, pf_disabled).
# TYPE macake_drift_repairs_total counter
macake_drift_repairs_total{kind="shaper_missing"} 2
# HELP macake_link_changes_total Changes of the policy matching an interface (network switches, interfaces going up or down).
# TYPE macake_link_changes_total counter
macake_link_changes_total 1
# HELP macake_load_ratio Achieved rate divided by the shaper rate (0 idle, about 1 saturated).
# TYPE macake_load_ratio gauge
macake_load_ratio{direction="download",link="wan"} 0.96
macake_load_ratio{direction="upload",link="wan"} 0
# HELP macake_probe_lost_total Probes that got no reply in time.
# TYPE macake_probe_lost_total counter
macake_probe_lost_total{link="wan",reflector="1.1.1.1"} 1
# HELP macake_probe_rtt_seconds Round-trip time of reflector replies (probes bypass the shaper, so this is the path's own queueing plus distance).
# TYPE macake_probe_rtt_seconds histogram
macake_probe_rtt_seconds_bucket{link="wan",le="0.0025"} 0
macake_probe_rtt_seconds_bucket{link="wan",le="0.005"} 0
macake_probe_rtt_seconds_bucket{link="wan",le="0.01"} 0
macake_probe_rtt_seconds_bucket{link="wan",le="0.015"} 0
macake_probe_rtt_seconds_bucket{link="wan",le="0.02"} 0
macake_probe_rtt_seconds_bucket{link="wan",le="0.03"} 0
macake_probe_rtt_seconds_bucket{link="wan",le="0.05"} 0
macake_probe_rtt_seconds_bucket{link="wan",le="0.075"} 1
macake_probe_rtt_seconds_bucket{link="wan",le="0.1"} 1
macake_probe_rtt_seconds_bucket{link="wan",le="0.15"} 2
macake_probe_rtt_seconds_bucket{link="wan",le="0.2"} 2
macake_probe_rtt_seconds_bucket{link="wan",le="0.3"} 2
macake_probe_rtt_seconds_bucket{link="wan",le="0.5"} 2
macake_probe_rtt_seconds_bucket{link="wan",le="1"} 2
macake_probe_rtt_seconds_bucket{link="wan",le="2"} 2
macake_probe_rtt_seconds_bucket{link="wan",le="+Inf"} 2
macake_probe_rtt_seconds_sum{link="wan"} 0.1875
macake_probe_rtt_seconds_count{link="wan"} 2
# HELP macake_probe_samples_total Reflector replies received.
# TYPE macake_probe_samples_total counter
macake_probe_samples_total{link="wan",reflector="1.1.1.1"} 2
# HELP macake_rate_changes_total Rates the controller set, by change: cut (lowered for bufferbloat), lower (lowered for another reason: decay toward base, the minimum on sleep) or raise (raised).
# TYPE macake_rate_changes_total counter
macake_rate_changes_total{change="cut",direction="download",link="wan"} 1
macake_rate_changes_total{change="cut",direction="upload",link="wan"} 0
macake_rate_changes_total{change="lower",direction="download",link="wan"} 1
macake_rate_changes_total{change="lower",direction="upload",link="wan"} 0
macake_rate_changes_total{change="raise",direction="download",link="wan"} 0
macake_rate_changes_total{change="raise",direction="upload",link="wan"} 2
# HELP macake_reconcile_last_success_timestamp_seconds Unix time of the last reconcile that did not fail; 0 before the first.
# TYPE macake_reconcile_last_success_timestamp_seconds gauge
macake_reconcile_last_success_timestamp_seconds 1.7723664005e+09
# HELP macake_reconciles_total Reconciles (config change, link change, drift tick, resync), by result: no_changes, applied or failed.
# TYPE macake_reconciles_total counter
macake_reconciles_total{result="applied"} 1
macake_reconciles_total{result="failed"} 1
macake_reconciles_total{result="no_changes"} 1
# HELP macake_shaper_engaged 1 while the link's shaper is installed; 0 while balanced mode has released it.
# TYPE macake_shaper_engaged gauge
macake_shaper_engaged{link="wan"} 0
# HELP macake_shaper_rate_bits_per_second Rate the shaper is set to (the dummynet pipe or tc class), in bit/s; 0 while no shaper is installed.
# TYPE macake_shaper_rate_bits_per_second gauge
macake_shaper_rate_bits_per_second{direction="download",link="wan"} 1.875e+08
macake_shaper_rate_bits_per_second{direction="upload",link="wan"} 2.1632e+07
# HELP macake_shaper_rate_max_bits_per_second Highest rate the controller may set, from the policy, in bit/s.
# TYPE macake_shaper_rate_max_bits_per_second gauge
macake_shaper_rate_max_bits_per_second{direction="download",link="wan"} 4e+08
macake_shaper_rate_max_bits_per_second{direction="upload",link="wan"} 0
# HELP macake_shaper_rate_min_bits_per_second Lowest rate the controller may set, from the policy, in bit/s.
# TYPE macake_shaper_rate_min_bits_per_second gauge
macake_shaper_rate_min_bits_per_second{direction="download",link="wan"} 2.5e+07
macake_shaper_rate_min_bits_per_second{direction="upload",link="wan"} 0
`
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(expected), macakeNames(expected)...); err != nil {
		t.Error(err)
	}
	body := get(t, url)
	wants := []string{"\ngo_goroutines ", "\ngo_memstats_alloc_bytes ", "\ngo_gc_duration_seconds_count ",
		"\nprocess_cpu_seconds_total ", "\nprocess_max_fds ", "\nprocess_open_fds ", "\nprocess_start_time_seconds "}
	if runtime.GOOS == "linux" {
		wants = append(wants, "\nprocess_resident_memory_bytes ", "\nprocess_virtual_memory_bytes ")
	}
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q (Go runtime and process collectors)", strings.TrimSpace(want))
		}
	}
	if got := get(t, strings.TrimSuffix(url, "metrics")); !strings.Contains(got, "/metrics") {
		t.Errorf("index page: %q", got)
	}
}

// A scraper that asks for gzip gets it (Go's client asks by default and
// says whether it decompressed).
func TestScrapeIsGzippedWhenAsked(t *testing.T) {
	url := serve(t, newMetrics()) + "/metrics"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Uncompressed || !strings.Contains(string(body), "# TYPE go_goroutines gauge") {
		t.Errorf("gzip asked: decompressed %v, body %.80q", resp.Uncompressed, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q; want the text format's", ct)
	}
}

// macakeNames lists the metric families in an expected exposition.
func macakeNames(exposition string) []string {
	var names []string
	for _, line := range strings.Split(exposition, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[1] == "TYPE" {
			names = append(names, f[2])
		}
	}
	return names
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(b)
}

func TestListenRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:9846", ":9846", "[::]:9846", "192.168.1.10:9846", "[2001:db8::1]:9846", "metrics.example:9846"} {
		ln, err := metrics.Listen(addr)
		if err == nil {
			ln.Close()
			t.Errorf("Listen(%q) accepted a non-loopback address", addr)
			continue
		}
		if !errors.Is(err, metrics.ErrNotLoopback) || !strings.Contains(err.Error(), "no authentication") {
			t.Errorf("Listen(%q): %v; want ErrNotLoopback saying why (no authentication)", addr, err)
		}
	}
	err := newMetrics().Serve(context.Background(), "0.0.0.0:9846")
	if !errors.Is(err, metrics.ErrNotLoopback) {
		t.Errorf("Serve(0.0.0.0:9846): %v", err)
	}
	if !strings.Contains(err.Error(), `refusing to listen on "0.0.0.0:9846": 0.0.0.0 means every interface`) {
		t.Errorf("unclear refusal: %v", err)
	}
	if _, err := metrics.Listen("9846"); err == nil || errors.Is(err, metrics.ErrNotLoopback) || !strings.Contains(err.Error(), "want host:port") {
		t.Errorf("Listen(9846): %v", err)
	}
}

func TestListenAcceptsLoopback(t *testing.T) {
	addrs := []string{"127.0.0.1:0", "localhost:0", "127.0.0.2:0"}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		ln.Close()
		addrs = append(addrs, "[::1]:0")
	}
	for _, addr := range addrs {
		ln, err := metrics.Listen(addr)
		if err != nil {
			t.Errorf("Listen(%q): %v", addr, err)
			continue
		}
		if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
			t.Errorf("Listen(%q) bound %v", addr, ip)
		}
		ln.Close()
	}
}

func TestServeStopsWithContext(t *testing.T) {
	m := newMetrics()
	ln, err := metrics.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.ServeListener(ctx, ln) }()
	get(t, "http://"+addr+"/metrics")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ServeListener after cancel: %v", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("still accepting connections after shutdown")
	}
	// A port in use is an error at once, not a hang.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if err := m.Serve(context.Background(), busy.Addr().String()); err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Errorf("Serve on a busy port: %v", err)
	}
}

func TestRemoveLinkDropsItsSeries(t *testing.T) {
	m := newMetrics()
	wan, lte := m.Link("wan"), m.Link("lte")
	if m.Link("wan") != wan {
		t.Error("Link returned a new handle for the same link")
	}
	wan.Reflector(netip.MustParseAddr("9.9.9.9")).Sample(time.Millisecond)
	lte.Direction(shape.Upload).SetShaperRate(5_000_000)
	m.RemoveLink("wan")
	// The old handle stays safe to use and creates nothing.
	wan.Direction(shape.Download).SetShaperRate(1)
	wan.SetState("weird")
	wan.Reflector(netip.MustParseAddr("8.8.8.8")).Sample(time.Millisecond)
	families, err := gatherer(m).Gather()
	if err != nil {
		t.Fatal(err)
	}
	lteSeries := 0
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			for _, lp := range metric.GetLabel() {
				if lp.GetName() == "link" && lp.GetValue() == "wan" {
					t.Errorf("%s still has a series for the removed link", f.GetName())
				}
				if lp.GetName() == "link" && lp.GetValue() == "lte" {
					lteSeries++
				}
			}
		}
	}
	if lteSeries == 0 {
		t.Error("removing wan removed lte too")
	}
	m.Link("wan")
	expected := `
# HELP macake_shaper_rate_bits_per_second Rate the shaper is set to (the dummynet pipe or tc class), in bit/s; 0 while no shaper is installed.
# TYPE macake_shaper_rate_bits_per_second gauge
macake_shaper_rate_bits_per_second{direction="download",link="lte"} 0
macake_shaper_rate_bits_per_second{direction="download",link="wan"} 0
macake_shaper_rate_bits_per_second{direction="upload",link="lte"} 5e+06
macake_shaper_rate_bits_per_second{direction="upload",link="wan"} 0
`
	if err := testutil.GatherAndCompare(gatherer(m), strings.NewReader(expected), "macake_shaper_rate_bits_per_second"); err != nil {
		t.Errorf("a re-added link starts afresh: %v", err)
	}
}

func TestRemoveReflector(t *testing.T) {
	m := newMetrics()
	wan := m.Link("wan")
	for _, a := range []string{"1.1.1.1", "9.9.9.9"} {
		wan.Reflector(netip.MustParseAddr(a)).Lost()
	}
	wan.RemoveReflector(netip.MustParseAddr("9.9.9.9"))
	if n, err := testutil.GatherAndCount(gatherer(m), "macake_probe_lost_total"); err != nil || n != 1 {
		t.Errorf("%d probe_lost series after removing a reflector (%v); want 1", n, err)
	}
}

// Two instances (a restart inside one process, or tests) share nothing.
func TestInstancesAreIndependent(t *testing.T) {
	a, b := newMetrics(), newMetrics()
	a.Link("wan").Direction(shape.Download).SetShaperRate(1)
	n, err := testutil.GatherAndCount(gatherer(b), "macake_shaper_rate_bits_per_second")
	if err != nil || n != 0 {
		t.Errorf("a second instance has %d shaper rate series (%v); want none", n, err)
	}
}

// The daemon updates from the controller goroutine while Prometheus
// scrapes; run with -race.
func TestConcurrentUpdatesAndScrapes(t *testing.T) {
	m := newMetrics()
	url := serve(t, m) + "/metrics"
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			l := m.Link([]string{"wan", "lte"}[i%2])
			d := l.Direction(shape.Direction(i % 2))
			r := l.Reflector(netip.AddrFrom4([4]byte{9, 9, 9, byte(i)}))
			for j := range 500 {
				d.RateChanged(int64(j), int64(j+1), false)
				d.SetDelay(time.Duration(j)*time.Microsecond, time.Millisecond)
				r.Sample(time.Duration(j) * time.Microsecond)
				l.SetState(metrics.States[j%len(metrics.States)])
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			get(t, url)
		}
	})
	wg.Wait()
	families, err := gatherer(m).Gather()
	if err != nil {
		t.Fatal(err)
	}
	raises := 0.0
	for _, f := range families {
		if f.GetName() == "macake_rate_changes_total" {
			for _, metric := range f.GetMetric() {
				raises += metric.GetCounter().GetValue()
			}
		}
		if f.GetName() == "macake_controller_state" {
			ones := map[string]float64{}
			for _, metric := range f.GetMetric() {
				ones[metric.GetLabel()[0].GetValue()] += metric.GetGauge().GetValue()
			}
			for link, n := range ones {
				if n != 1 {
					t.Errorf("link %s is in %v states at once", link, n)
				}
			}
		}
	}
	if raises != 4*500 {
		t.Errorf("counted %v rate changes, made %d", raises, 4*500)
	}
}

// The controller's per-sample updates must not allocate.
func TestHotPathDoesNotAllocate(t *testing.T) {
	m := newMetrics()
	l := m.Link("wan")
	d := l.Direction(shape.Download)
	r := l.Reflector(netip.MustParseAddr("1.1.1.1"))
	allocs := testing.AllocsPerRun(100, func() { probeSample(d, r) })
	allocs += testing.AllocsPerRun(100, func() { loadSample(d) })
	if allocs != 0 {
		t.Errorf("%v allocations per sample; want none", allocs)
	}
}

// probeSample is what the daemon does per reflector reply.
func probeSample(d *metrics.Direction, r *metrics.Reflector) {
	r.Sample(23 * time.Millisecond)
	d.SetDelay(9*time.Millisecond, 4*time.Millisecond)
	d.SetBufferbloatSamples(1)
}

// loadSample is what the daemon does per byte-counter sample, with a rate
// decision.
func loadSample(d *metrics.Direction) {
	d.SetAchievedRate(180_000_000)
	d.SetLoad(0.9)
	d.RateChanged(187_500_000, 195_000_000, false)
}

func BenchmarkProbeSample(b *testing.B) {
	l := newMetrics().Link("wan")
	d, r := l.Direction(shape.Download), l.Reflector(netip.MustParseAddr("1.1.1.1"))
	b.ReportAllocs()
	for b.Loop() {
		probeSample(d, r)
	}
}

func BenchmarkLoadSample(b *testing.B) {
	d := newMetrics().Link("wan").Direction(shape.Download)
	b.ReportAllocs()
	for b.Loop() {
		loadSample(d)
	}
}

func BenchmarkScrape(b *testing.B) {
	m := newMetrics()
	for _, name := range []string{"wan", "lte"} {
		l := m.Link(name)
		for i := range 6 {
			l.Reflector(netip.AddrFrom4([4]byte{9, 9, 9, byte(i)})).Sample(time.Millisecond)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := gatherer(m).Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// The state label's values are the controller's own status names, so the
// daemon passes Status.String() straight through.
func TestStatesAreTheControllerStatuses(t *testing.T) {
	for i, s := range metrics.States {
		if got := controller.Status(i).String(); got != s {
			t.Errorf("States[%d] = %q; controller.Status(%d) is %q", i, s, i, got)
		}
	}
}

// TestServeRefusesForeignHost: a page elsewhere that rebinds its DNS name
// to 127.0.0.1 sends its own name as Host, and the metrics refuse it as
// the status page does (one rule, loopback.Endpoint.Handler).
func TestServeRefusesForeignHost(t *testing.T) {
	base := serve(t, newMetrics())
	addr := strings.TrimPrefix(base, "http://")
	for host, want := range map[string]int{addr: 200, "rebound.example:9846": http.StatusMisdirectedRequest} {
		req, _ := http.NewRequest("GET", base+"/metrics", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /metrics with Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestShaperTinSeries: CAKE's tins become one series per tin beside the
// shaper's own, each counter and gauge in base units (delays in seconds,
// the threshold in bit/s); a reading without tins (htb, dummynet) has no
// tin series, and the next reading replaces the last.
func TestShaperTinSeries(t *testing.T) {
	m := newMetrics()
	up := metrics.ShaperCounters{Link: "wan", Direction: shape.Upload, Bytes: 3000, Packets: 2, Tins: []backend.TinStats{
		{Name: "bulk", ThresholdBits: 1_250_000},
		{Name: "best_effort", ThresholdBits: 20_000_000, Bytes: 2900, Packets: 2, Drops: 7, ECNMarks: 3, ACKDrops: 1,
			BacklogBytes: 1514, PeakDelay: 8810 * time.Microsecond, AvgDelay: 398 * time.Microsecond, BaseDelay: 15 * time.Microsecond,
			SparseFlows: 8, BulkFlows: 1, UnresponsiveFlows: 2},
	}}
	m.SetShaperCounters([]metrics.ShaperCounters{up, {Link: "wan", Direction: shape.Download, Bytes: 1}}, fixedNow)
	expected := `
# HELP macake_shaper_tin_delay_average_seconds Queueing delay CAKE measures in the tin, its moving average.
# TYPE macake_shaper_tin_delay_average_seconds gauge
macake_shaper_tin_delay_average_seconds{direction="upload",link="wan",tin="best_effort"} 0.000398
macake_shaper_tin_delay_average_seconds{direction="upload",link="wan",tin="bulk"} 0
# HELP macake_shaper_tin_drops_total Packets CAKE dropped from the tin (its AQM, or its memory limit).
# TYPE macake_shaper_tin_drops_total counter
macake_shaper_tin_drops_total{direction="upload",link="wan",tin="best_effort"} 7
macake_shaper_tin_drops_total{direction="upload",link="wan",tin="bulk"} 0
# HELP macake_shaper_tin_ecn_marks_total Packets CAKE marked with ECN in the tin instead of dropping them.
# TYPE macake_shaper_tin_ecn_marks_total counter
macake_shaper_tin_ecn_marks_total{direction="upload",link="wan",tin="best_effort"} 3
macake_shaper_tin_ecn_marks_total{direction="upload",link="wan",tin="bulk"} 0
# HELP macake_shaper_tin_sparse_flows Flows CAKE schedules as sparse (new or light) in the tin at the last reading.
# TYPE macake_shaper_tin_sparse_flows gauge
macake_shaper_tin_sparse_flows{direction="upload",link="wan",tin="best_effort"} 8
macake_shaper_tin_sparse_flows{direction="upload",link="wan",tin="bulk"} 0
# HELP macake_shaper_tin_threshold_bits_per_second The rate up to which the tin keeps its priority.
# TYPE macake_shaper_tin_threshold_bits_per_second gauge
macake_shaper_tin_threshold_bits_per_second{direction="upload",link="wan",tin="best_effort"} 2e+07
macake_shaper_tin_threshold_bits_per_second{direction="upload",link="wan",tin="bulk"} 1.25e+06
`
	names := []string{"macake_shaper_tin_delay_average_seconds", "macake_shaper_tin_drops_total", "macake_shaper_tin_ecn_marks_total",
		"macake_shaper_tin_sparse_flows", "macake_shaper_tin_threshold_bits_per_second"}
	if err := testutil.GatherAndCompare(gatherer(m), strings.NewReader(expected), names...); err != nil {
		t.Error(err)
	}
	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`macake_shaper_tin_bulk_flows{direction="upload",link="wan",tin="best_effort"} 1`,
		`macake_shaper_tin_unresponsive_flows{direction="upload",link="wan",tin="best_effort"} 2`,
		`macake_shaper_tin_ack_drops_total{direction="upload",link="wan",tin="best_effort"} 1`,
		`macake_shaper_tin_backlog_bytes{direction="upload",link="wan",tin="best_effort"} 1514`,
		`macake_shaper_tin_delay_peak_seconds{direction="upload",link="wan",tin="best_effort"} 0.00881`,
		`macake_shaper_tin_delay_base_seconds{direction="upload",link="wan",tin="best_effort"} 1.5e-05`,
		`macake_shaper_tin_bytes_total{direction="upload",link="wan",tin="best_effort"} 2900`,
		`macake_shaper_tin_packets_total{direction="upload",link="wan",tin="best_effort"} 2`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the exposition lacks %s", want)
		}
	}
	if strings.Contains(b.String(), `direction="download",link="wan",tin=`) {
		t.Error("a shaper without tins has tin series")
	}
	m.SetShaperCounters([]metrics.ShaperCounters{{Link: "wan", Direction: shape.Upload, Bytes: 1}}, fixedNow)
	b.Reset()
	m.WriteText(&b)
	if strings.Contains(b.String(), "macake_shaper_tin_") {
		t.Error("a reading without tins left the last reading's tin series")
	}
}
