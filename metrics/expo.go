// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"bufio"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The metrics are kept and written here, in the Prometheus text format
// (version 0.0.4), rather than with the Prometheus client library: that
// library and the protobuf runtime it links cost `macake watch` about
// 2.7 MiB of resident memory (package initialisation touches their code
// and allocates, metrics endpoint or not; docs/MEASUREMENTS.md), and the
// daemon needs only gauges, counters and histograms with labels. Tests
// check the output with the client library's own parser.

// Metric types, as the TYPE line names them.
const (
	typeGauge     = "gauge"
	typeCounter   = "counter"
	typeHistogram = "histogram"
	typeSummary   = "summary"
)

// value is a float64 updated atomically (as its bits), so that an update
// on the controller's path is one store or one compare-and-swap loop.
type value struct{ bits atomic.Uint64 }

func (v *value) set(f float64) { v.bits.Store(math.Float64bits(f)) }

func (v *value) get() float64 { return math.Float64frombits(v.bits.Load()) }

func (v *value) add(f float64) {
	for {
		old := v.bits.Load()
		if v.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+f)) {
			return
		}
	}
}

// series is one labelled series of a family: a gauge's or counter's
// value, or a histogram's buckets and sum.
type series struct {
	// labels is the rendered label set, "" or `{a="x",b="y"}` (sorted by
	// label name), and the series' sort key.
	labels string
	// values are the label values in the family's label order.
	values []string
	v      value
	// upper are the histogram's bucket bounds; counts has one more
	// element, for +Inf.
	upper  []float64
	counts []atomic.Uint64
}

// Gauge is a value that goes up and down.
type Gauge struct{ s *series }

// Set sets the gauge.
func (g Gauge) Set(f float64) { g.s.v.set(f) }

// Counter is a count that only goes up.
type Counter struct{ s *series }

// Inc adds one.
func (c Counter) Inc() { c.s.v.add(1) }

// Histogram counts observations into buckets and sums them.
type Histogram struct{ s *series }

// Observe records one observation.
func (h Histogram) Observe(f float64) {
	h.s.counts[sort.SearchFloat64s(h.s.upper, f)].Add(1)
	h.s.v.add(f)
}

// detached returns a series that belongs to no family: updates to it are
// never written (a removed link's handles).
func detached(buckets []float64) *series {
	return &series{upper: buckets, counts: make([]atomic.Uint64, len(buckets)+1)}
}

// family is one metric family: its name, help, type, label names and
// series.
type family struct {
	name, help, typ string
	labels          []string
	buckets         []float64 // histograms only

	mu     sync.Mutex
	series map[string]*series // by label values joined with "\xff"
}

func newFamily(name, help, typ string, buckets []float64, labels ...string) *family {
	return &family{name: name, help: help, typ: typ, labels: labels, buckets: buckets, series: map[string]*series{}}
}

// with returns the series with these label values (in the family's
// label order), creating it at zero on first use.
func (f *family) with(values ...string) *series {
	if len(values) != len(f.labels) {
		panic("metrics: " + f.name + ": wrong number of label values")
	}
	key := strings.Join(values, "\xff")
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.series[key]; ok {
		return s
	}
	s := detached(f.buckets)
	s.values = slices.Clone(values)
	s.labels = renderLabels(f.labels, values, "", "")
	f.series[key] = s
	return s
}

func (f *family) gauge(values ...string) Gauge     { return Gauge{f.with(values...)} }
func (f *family) counter(values ...string) Counter { return Counter{f.with(values...)} }
func (f *family) histogram(values ...string) Histogram {
	return Histogram{f.with(values...)}
}

// delete removes the series with these label values.
func (f *family) delete(values ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.series, strings.Join(values, "\xff"))
}

// deleteAll removes every series.
func (f *family) deleteAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.series)
}

// deleteWhere removes every series whose label has this value.
func (f *family) deleteWhere(label, value string) {
	i := slices.Index(f.labels, label)
	if i < 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, s := range f.series {
		if s.values[i] == value {
			delete(f.series, k)
		}
	}
}

// write writes the family; a family without series writes nothing, as
// the client library does.
func (f *family) write(w *expo) {
	f.mu.Lock()
	list := make([]*series, 0, len(f.series))
	for _, s := range f.series {
		list = append(list, s)
	}
	f.mu.Unlock()
	if len(list) == 0 {
		return
	}
	slices.SortFunc(list, func(a, b *series) int { return strings.Compare(a.labels, b.labels) })
	w.header(f.name, f.help, f.typ)
	for _, s := range list {
		if f.typ != typeHistogram {
			w.sample(f.name, s.labels, s.v.get())
			continue
		}
		var cum uint64
		for i := range s.counts {
			cum += s.counts[i].Load()
			le := math.Inf(1)
			if i < len(s.upper) {
				le = s.upper[i]
			}
			w.sampleUint(f.name+"_bucket", renderLabels(f.labels, s.values, "le", formatFloat(le)), cum)
		}
		w.sample(f.name+"_sum", s.labels, s.v.get())
		w.sampleUint(f.name+"_count", s.labels, cum)
	}
}

// renderLabels renders label pairs sorted by name, with an extra pair
// (le, quantile) last when extra is not "".
func renderLabels(names, values []string, extra, extraValue string) string {
	if len(names) == 0 && extra == "" {
		return ""
	}
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	var b strings.Builder
	b.WriteByte('{')
	pair := func(n, v string) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteString(`="`)
		labelEscaper.WriteString(&b, v)
		b.WriteByte('"')
	}
	for _, i := range order {
		pair(names[i], values[i])
	}
	if extra != "" {
		pair(extra, extraValue)
	}
	b.WriteByte('}')
	return b.String()
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// formatFloat formats a value as the text format wants it.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// expo writes the text format. Errors stick in the bufio.Writer and come
// out of flush.
type expo struct{ w *bufio.Writer }

func (e *expo) header(name, help, typ string) {
	e.w.WriteString("# HELP " + name + " ")
	helpEscaper.WriteString(e.w, help)
	e.w.WriteString("\n# TYPE " + name + " " + typ + "\n")
}

func (e *expo) sample(name, labels string, v float64) {
	e.w.WriteString(name + labels + " " + formatFloat(v) + "\n")
}

func (e *expo) sampleUint(name, labels string, v uint64) {
	e.w.WriteString(name + labels + " " + strconv.FormatUint(v, 10) + "\n")
}

// single writes a family of one unlabelled sample.
func (e *expo) single(name, help, typ string, v float64) {
	e.header(name, help, typ)
	e.sample(name, "", v)
}
