// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestDecayIsNoCut: after a burst has raised the rates above base, idle
// decays them back step by step. A decay step is not a cut: it is logged
// at debug as event=lower, so `grep event=cut` finds only the cuts
// bufferbloat caused, and status's cut counter, the log and the metrics
// agree (issue 12, item 11).
func TestDecayIsNoCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHomeRig(t)
		time.Sleep(10 * time.Second)
		synctest.Wait()

		// A burst without bufferbloat: the rates climb above base.
		r.net.set(func(n *fakeNet) { n.busy = true })
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if got := r.pipeRate(48002); got <= 80_000_000 {
			t.Fatalf("download after 6 s of clean load: %d bit/s, want above the 80 Mbit/s base\n%s", got, r.log)
		}
		// Idle: the rates decay toward base.
		r.net.set(func(n *fakeNet) { n.busy = false })
		time.Sleep(20 * time.Second)
		synctest.Wait()
		log := r.log.String()
		if n := strings.Count(log, "event=cut"); n != 0 {
			t.Errorf("%d event=cut lines after a clean burst and idle; want none:\n%s", n, grepLines(log, "event=cut"))
		}
		if !regexp.MustCompile(`level=DEBUG msg="rate lowered" event=lower .*reason=decay`).MatchString(log) {
			t.Errorf("no decay step logged at debug as event=lower:\n%s", grepLines(log, "rate"))
		}
		if c := r.d.Status().Links[0].Controller; c == nil || c.Cuts != 0 {
			t.Errorf("status after decay only: %+v, want 0 cuts", c)
		}

		// Bufferbloat: real cuts, counted alike by status, log and metrics.
		r.bloat(150*time.Millisecond, 50_000_000)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		log = r.log.String()
		lines := strings.Count(log, "event=cut")
		if lines == 0 || !strings.Contains(grepLines(log, "event=cut"), "level=INFO") {
			t.Fatalf("no cut logged at info under bufferbloat:\n%s", log)
		}
		if got := r.d.Status().Links[0].Controller.Cuts; got != uint64(lines) {
			t.Errorf("status says %d cuts, the log has %d event=cut lines:\n%s", got, lines, grepLines(log, "event=cut"))
		}
		if got := metricSum(r.scrape(), `macake_rate_changes_total{change="cut"`); got != lines {
			t.Errorf("metrics count %d cuts, the log %d", got, lines)
		}
	})
}

// metricSum adds the values of the scraped series that start with prefix.
func metricSum(scrape, prefix string) int {
	n := 0
	for _, l := range strings.Split(scrape, "\n") {
		if strings.HasPrefix(l, prefix) {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += int(v)
		}
	}
	return n
}
