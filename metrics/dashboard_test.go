// SPDX-License-Identifier: Apache-2.0

package metrics_test

import (
	"encoding/json"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/metrics"
	"github.com/macake/macake/shape"
)

// families returns every family a busy daemon's registry exports, with
// its label names (a histogram's _bucket, _sum and _count series too).
func families(t *testing.T) map[string][]string {
	t.Helper()
	m := newMetrics()
	l := m.Link("home")
	l.Direction(shape.Download).RateChanged(80e6, 70e6, true)
	l.Reflector(netip.MustParseAddr("1.1.1.1")).Sample(20 * time.Millisecond)
	l.Reflector(netip.MustParseAddr("1.1.1.1")).Lost()
	m.SetShaperCounters([]metrics.ShaperCounters{{Link: "home", Direction: shape.Download, Bytes: 1,
		Tins: []backend.TinStats{{Name: "best_effort", Bytes: 1}}}}, fixedNow)
	m.Reconciled(1, time.Millisecond, nil)
	m.DriftRepaired("rules_missing")
	m.LinkChanged()
	m.SetPauses(map[string]time.Time{"home": fixedNow})
	mfs, err := gatherer(m).Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, mf := range mfs {
		var labels []string
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if !slices.Contains(labels, lp.GetName()) {
					labels = append(labels, lp.GetName())
				}
			}
		}
		out[mf.GetName()] = labels
		if mf.GetType().String() == "HISTOGRAM" {
			out[mf.GetName()+"_bucket"] = append(slices.Clone(labels), "le")
			out[mf.GetName()+"_sum"], out[mf.GetName()+"_count"] = labels, labels
		}
	}
	return out
}

// TestGrafanaDashboardQueriesExistingMetrics: every metric the example
// dashboard queries is one the daemon exports, with the labels its
// selectors name, so renaming a metric cannot leave the dashboard blank.
func TestGrafanaDashboardQueriesExistingMetrics(t *testing.T) {
	b, err := os.ReadFile("../examples/grafana/macake.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			ID      int
			Type    string
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Definition string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	fams := families(t)
	var exprs []string
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	selector := regexp.MustCompile(`\b(macake_[a-z_]+)(\{([^}]*)\})?`)
	matcher := regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)`)
	grouping := regexp.MustCompile(`\bby \(([^)]*)\)`)
	used := map[string]bool{}
	for _, e := range exprs {
		ms := selector.FindAllStringSubmatch(e, -1)
		if len(ms) == 0 {
			t.Errorf("query %q names no macake metric", e)
		}
		var labels []string
		for _, m := range ms {
			name := m[1]
			used[name] = true
			have, ok := fams[name]
			if !ok {
				t.Errorf("query %q: macake exports no %s", e, name)
				continue
			}
			for _, lm := range matcher.FindAllStringSubmatch(m[3], -1) {
				if !slices.Contains(have, lm[1]) {
					t.Errorf("query %q: %s has no label %q (it has %v)", e, name, lm[1], have)
				}
			}
			labels = append(labels, have...)
		}
		for _, g := range grouping.FindAllStringSubmatch(e, -1) {
			for _, l := range strings.Split(g[1], ",") {
				if l = strings.TrimSpace(l); !slices.Contains(labels, l) {
					t.Errorf("query %q groups by %q, which its metrics lack", e, l)
				}
			}
		}
	}
	// The dashboard shows what the shaper does: its counters among them.
	for _, want := range []string{"macake_shaper_rate_bits_per_second", "macake_achieved_rate_bits_per_second", "macake_delay_window_seconds", "macake_shaper_drops_total", "macake_controller_state"} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}

// TestOperationsDocumentsEveryMetric: docs/OPERATIONS.md's table lists
// every macake metric the daemon exports, and no other.
func TestOperationsDocumentsEveryMetric(t *testing.T) {
	b, err := os.ReadFile("../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(macake_[a-z_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		documented[m[1]] = true
	}
	for name := range families(t) {
		if !strings.HasPrefix(name, "macake_") || strings.HasSuffix(name, "_bucket") || strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count") {
			continue
		}
		if !documented[name] {
			t.Errorf("docs/OPERATIONS.md does not list %s", name)
		}
		delete(documented, name)
	}
	for name := range documented {
		t.Errorf("docs/OPERATIONS.md lists %s, which macake does not export", name)
	}
}
