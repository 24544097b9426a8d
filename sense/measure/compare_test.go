// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/internal/speedtest"
	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
)

type recordingSwitch struct {
	calls []string
	fail  string
}

func (s *recordingSwitch) Off(_ context.Context, lease time.Duration) error {
	s.calls = append(s.calls, fmt.Sprintf("off %v", lease))
	if s.fail == "off" {
		return errors.New("no")
	}
	return nil
}

func (s *recordingSwitch) On(context.Context) error {
	s.calls = append(s.calls, "on")
	return nil
}

// benchOf is a bench report of a 50/10 Mbit/s link whose loads add the
// given medians (download, upload, both).
func benchOf(down, up, both float64, downRate, upRate float64) BenchReport {
	r1, r2 := netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("9.9.9.9")
	sum := func(p50 float64) probe.Summary {
		return probe.Summary{Samples: 80, P50: ms(p50), P90: ms(p50 * 1.2), TM95: ms(p50 * 1.05)}
	}
	idle := map[netip.Addr]probe.Summary{r1: sum(20), r2: sum(20)}
	phase := func(added float64) PhaseLatency {
		l := map[netip.Addr]probe.Summary{r1: sum(20 + added), r2: sum(20 + added)}
		return PhaseLatency{Targets: l, Added: probe.LikeForLike(idle, l), Sent: 160, Lost: int(added / 100)}
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	window := func(bps float64) speedtest.Result {
		return speedtest.Result{BitsPerSecond: bps, Streams: 8, Start: t0, SteadyFrom: t0.Add(2 * time.Second), SteadyTo: t0.Add(10 * time.Second)}
	}
	res := LoadResult{Idle: idle, Download: window(downRate), Upload: window(upRate), BothDownload: window(downRate * 0.9), BothUpload: window(upRate * 0.9),
		DownLatency: phase(down), UpLatency: phase(up), BothLatency: phase(both), Congestion: "cubic"}
	ep, _ := speedtest.ServerEndpoint("http://198.51.100.10:8080")
	return NewBenchReport(ep, LoadTest{Targets: shape.ICMPReflectors([]netip.Addr{r1, r2})}, res)
}

func TestCompareRunsOffOnOff(t *testing.T) {
	runs := []BenchReport{benchOf(420, 45, 460, 47.8e6, 9.6e6), benchOf(4, 3, 7, 43.1e6, 8.7e6), benchOf(380, 40, 430, 48.9e6, 9.5e6)}
	sw := &recordingSwitch{}
	n := 0
	c := Compare{Switch: sw, Lease: 80 * time.Second, LeaveOn: true, Bench: func(context.Context) (BenchReport, error) {
		n++
		return runs[n-1], nil
	}}
	rep, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sw.calls); got != "[off 1m20s on off 1m20s on]" {
		t.Errorf("switch calls %s, want off, on, off, then back on", got)
	}
	if rep.Before != "D" || rep.After != "A+" || len(rep.Runs) != 3 || !rep.Runs[1].Shaped || rep.Runs[0].Shaped {
		t.Errorf("report: before %s after %s, %d runs", rep.Before, rep.After, len(rep.Runs))
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	golden.Check(t, "testdata/compare.txt", b.Bytes(), "what `macake bench --compare` prints; docs/USAGE.md shows it")

	// A run that fails is tried once more (with a new lease); one that
	// fails twice ends the compare with the runs done so far, and still
	// puts the shaping back; without LeaveOn it stays off.
	sw = &recordingSwitch{}
	c.Switch, c.Bench = sw, func(context.Context) (BenchReport, error) { return BenchReport{}, errors.New("the server went away") }
	if _, err := c.Run(context.Background()); err == nil || fmt.Sprint(sw.calls) != "[off 1m20s off 1m20s on]" {
		t.Errorf("a failed run: %v, calls %v", err, sw.calls)
	}
	n = 0
	sw = &recordingSwitch{}
	c.Switch, c.Bench = sw, func(context.Context) (BenchReport, error) {
		if n++; n == 2 {
			return BenchReport{}, errors.New("write: connection timed out")
		}
		return runs[map[int]int{1: 0, 3: 1, 4: 2}[n]], nil
	}
	rep, err = c.Run(context.Background())
	if err != nil || len(rep.Runs) != 3 || n != 4 {
		t.Errorf("a run that fails once: %v, %d runs after %d benches; want it retried and the compare complete", err, len(rep.Runs), n)
	}
	n = 0
	c.Bench = func(context.Context) (BenchReport, error) {
		if n++; n >= 2 {
			return BenchReport{}, errors.New("write: connection timed out")
		}
		return runs[0], nil
	}
	rep, err = c.Run(context.Background())
	if err == nil || rep.Failed != "shaped" || len(rep.Runs) != 1 {
		t.Fatalf("a run that fails twice: %v, failed %q, %d runs; want the unshaped run kept", err, rep.Failed, len(rep.Runs))
	}
	b.Reset()
	rep.WriteText(&b)
	golden.Check(t, "testdata/compare-incomplete.txt", b.Bytes(), "bench --compare when a run fails twice")
	sw = &recordingSwitch{fail: "off"}
	c.Switch, c.LeaveOn = sw, false
	if _, err := c.Run(context.Background()); err == nil || fmt.Sprint(sw.calls) != "[off 1m20s]" {
		t.Errorf("a switch that fails: %v, calls %v", err, sw.calls)
	}
}

// TestCompareSettlesBeforeTheShapedRun: the shaped run starts Settle
// after the shaping is back, the unshaped ones at once.
func TestCompareSettlesBeforeTheShapedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		c := Compare{Switch: &recordingSwitch{}, Settle: 10 * time.Second, Bench: func(context.Context) (BenchReport, error) {
			at = append(at, time.Since(start))
			return benchOf(4, 3, 7, 43.1e6, 8.7e6), nil
		}}
		if _, err := c.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(at); got != "[0s 10s 10s]" {
			t.Errorf("the runs started at %s, want [0s 10s 10s]", got)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Run(ctx); err == nil {
			t.Error("an interrupted settle did not stop the compare")
		}
	})
}
