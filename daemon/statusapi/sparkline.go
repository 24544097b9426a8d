// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/macake/macake/shape"
)

// sparkWidth is how many marks a history line has at most.
const sparkWidth = 60

// sparkMarks are the eight heights of a mark, lowest first.
var sparkMarks = []rune("▁▂▃▄▅▆▇█")

// bucket reduces values to at most width marks of per samples each (the
// last mark may hold fewer): the mean of what was measured, or with peak
// the largest, so that a short delay spike still shows. A mark without a
// measurement is Missing.
func bucket(values []Value, width int, peak bool) []Value {
	if len(values) == 0 {
		return nil
	}
	per := (len(values) + width - 1) / width
	var out []Value
	for i := 0; i < len(values); i += per {
		sum, n, top := 0.0, 0, math.Inf(-1)
		for _, v := range values[i:min(i+per, len(values))] {
			if v.IsMissing() {
				continue
			}
			sum, n, top = sum+float64(v), n+1, max(top, float64(v))
		}
		switch {
		case n == 0:
			out = append(out, Missing)
		case peak:
			out = append(out, Value(top))
		default:
			out = append(out, Value(sum/float64(n)))
		}
	}
	return out
}

// Sparkline draws marks scaled from 0 to top (top ≤ 0: the largest mark),
// a blank where nothing was measured.
func Sparkline(marks []Value, top float64) string {
	if top <= 0 {
		for _, v := range marks {
			if !v.IsMissing() {
				top = max(top, float64(v))
			}
		}
	}
	var b strings.Builder
	for _, v := range marks {
		switch {
		case v.IsMissing():
			b.WriteRune(' ')
		case top <= 0 || v <= 0:
			b.WriteRune(sparkMarks[0])
		default:
			i := int(math.Round(float64(v) / top * float64(len(sparkMarks)-1)))
			b.WriteRune(sparkMarks[min(max(i, 0), len(sparkMarks)-1)])
		}
	}
	return b.String()
}

// stats returns the last measured value and the largest and smallest,
// with ok false when nothing was measured.
func stats(values []Value) (last, lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if v.IsMissing() {
			continue
		}
		last, lo, hi, ok = float64(v), min(lo, float64(v)), max(hi, float64(v)), true
	}
	return last, lo, hi, ok
}

// writeHistory prints a link's history as sparklines: per direction the
// shaper's rate and the achieved rate on one scale, then the round trip
// with its idle baseline.
func writeHistory(w io.Writer, h *History) {
	n := len(h.Times)
	if n == 0 {
		return
	}
	step := time.Duration(h.StepSeconds * float64(time.Second))
	per := (n + sparkWidth - 1) / sparkWidth
	span := time.Duration(n) * step
	fmt.Fprintf(w, "  last %s, one mark per %s:\n", humanAge(span), humanAge(time.Duration(per)*step))
	rate := func(v float64) string { return shape.FormatApprox(v) }
	for _, d := range []struct {
		name             string
		shaper, achieved []Value
	}{{"download", h.ShaperDown, h.AchievedDown}, {"upload", h.ShaperUp, h.AchievedUp}} {
		sMarks, aMarks := bucket(d.shaper, sparkWidth, false), bucket(d.achieved, sparkWidth, false)
		_, _, top, _ := stats(append(append([]Value{}, sMarks...), aMarks...))
		if now, lo, hi, ok := stats(d.shaper); ok {
			fmt.Fprintf(w, "    %-9s %s  shaper %s now (%s–%s)\n", d.name, Sparkline(sMarks, top), rate(now), rate(lo), rate(hi))
		}
		if now, _, hi, ok := stats(d.achieved); ok {
			fmt.Fprintf(w, "    %-9s %s  achieved %s now (max %s)\n", "", Sparkline(aMarks, top), rate(now), rate(hi))
		}
	}
	if now, _, hi, ok := stats(h.RTT); ok {
		marks := bucket(h.RTT, sparkWidth, true)
		lat := func(s float64) string { return shape.FormatLatency(seconds(s)) }
		base := ""
		if b, _, _, ok := stats(h.Baseline); ok {
			base = "; idle baseline " + lat(b)
		}
		fmt.Fprintf(w, "    %-9s %s  %s now (max %s%s)\n", "rtt", Sparkline(marks, 0), lat(now), lat(hi), base)
	}
}
