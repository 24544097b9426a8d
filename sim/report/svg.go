// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/macake/macake/shape"
	"github.com/macake/macake/sim"
)

// palette gives each controller a colour that stays the same in every
// panel; "none" is always red, the shapers blues and greens.
var palette = map[string]string{
	"none":          "#d62728",
	"fixed":         "#8c564b",
	"fixed-p5":      "#bcbd22",
	"upstream":      "#ff7f0e",
	"ours":          "#1f77b4",
	"oracle":        "#2ca02c",
	"oracle-lag0.1": "#17becf",
	"oracle-lag0.5": "#9467bd",
	"oracle-lag1":   "#e377c2",
}

var spare = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

func colour(name string, i int) string {
	if c, ok := palette[name]; ok {
		return c
	}
	return spare[i%len(spare)]
}

// SVG draws the picture of a simulation. When the run has an unshaped
// arm ("none") and a shaped one (Shaped picks it), it opens with what a
// reader takes in at a glance: a headline saying who wins and by how much,
// and one before/after panel per loaded direction with the unshaped and
// the shaped added delay over time on the same linear axis (the whole
// point, which a log-scale strip per controller hid). Then the detail:
// for every controller (rows) and loaded direction (columns), the link's
// capacity (grey), the pipe rate (colour) and what got through (thin
// black), and under it the added one-way delay on a log scale with the
// 30 ms and 100 ms marks, with the legend saying what oracle and score
// are. title goes on top.
func SVG(w io.Writer, title string, results []*sim.Result) error {
	if len(results) == 0 || results[0].Series == nil {
		return fmt.Errorf("svg: no time series in the results (run with Series)")
	}
	var dirs []shape.Direction
	for _, d := range []shape.Direction{shape.Download, shape.Upload} {
		if results[0].Dir[d].Loaded {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		dirs = []shape.Direction{shape.Download}
	}
	const (
		left, right = 70.0, 20.0
		panelW      = 520.0
		gapX        = 70.0
		rateH       = 92.0
		delayH      = 54.0
		rowGap      = 34.0
	)
	rowH := rateH + delayH + rowGap
	width := left + float64(len(dirs))*panelW + float64(len(dirs)-1)*gapX + right
	before, after := unshapedAndShaped(results)
	summaryH := 0.0
	if before != nil && after != nil {
		summaryH = beforeAfterH
	}
	top := 120.0 + summaryH
	height := top + float64(len(results))*rowH + 40

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="26" font-size="17" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	if summaryH > 0 {
		beforeAfter(&b, before, after, dirs, left, panelW, gapX)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="15" font-weight="bold">The detail: every controller</text>`+"\n", left, summaryH+40)
	for i, line := range []string{
		"grey: link capacity · colour: pipe rate · black: throughput · lower strip: added delay, log scale, dashed at 30 and 100 ms",
		"U: share of the capacity used · D95: 95 % of the added delay is below it · score: U ÷ (1 + D95 ÷ 30 ms), higher is better",
		"oracle: a shaper told the link's capacity in advance, the best any controller could do; none: no shaper at all",
	} {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="12" fill="#555">%s</text>`+"\n", left, summaryH+58+16*float64(i), html.EscapeString(line))
	}

	// One rate scale per direction, shared by all rows, so rows compare.
	var rateMax [2]float64
	var secs float64
	for _, r := range results {
		s := r.Series
		secs = float64(len(s.Capacity[0])) * s.Bin.Seconds()
		for _, d := range dirs {
			for _, v := range smooth(s.Capacity[d], 5) {
				rateMax[d] = math.Max(rateMax[d], v)
			}
			for _, v := range s.Rate[d] {
				rateMax[d] = math.Max(rateMax[d], v)
			}
		}
	}
	for _, d := range dirs {
		rateMax[d] = niceCeil(rateMax[d] * 1.05)
	}

	for ri, r := range results {
		s := r.Series
		y0 := top + float64(ri)*rowH
		col := colour(r.Controller, ri)
		for di, d := range dirs {
			x0 := left + float64(di)*(panelW+gapX)
			n := len(s.Capacity[d])
			xAt := func(i int) float64 { return x0 + panelW*float64(i)/float64(max(n-1, 1)) }
			yRate := func(v float64) float64 { return y0 + rateH - rateH*math.Min(v/rateMax[d], 1) }
			// Panel frame and label.
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fafafa" stroke="#ddd"/>`+"\n", x0, y0, panelW, rateH+delayH)
			label := fmt.Sprintf("%s — %s", r.Controller, d)
			x := r.Dir[d]
			stats := fmt.Sprintf("U %.2f · D95 %s · score %.3f", x.U, msUnit(x.D95), x.Score)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="13" font-weight="bold" fill="%s">%s</text>`+"\n", x0, y0-6, col, html.EscapeString(label))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" fill="#333" text-anchor="end">%s</text>`+"\n", x0+panelW, y0-6, html.EscapeString(stats))
			// Capacity as a filled area (smoothed over 0.5 s: mahimahi
			// opportunities are too bursty to read at 100 ms).
			capS := smooth(s.Capacity[d], 5)
			var area strings.Builder
			fmt.Fprintf(&area, "M%.1f,%.1f", xAt(0), yRate(0))
			for i, v := range capS {
				fmt.Fprintf(&area, " L%.1f,%.1f", xAt(i), yRate(v))
			}
			fmt.Fprintf(&area, " L%.1f,%.1f Z", xAt(n-1), yRate(0))
			fmt.Fprintf(&b, `<path d="%s" fill="#d9d9d9" stroke="none"/>`+"\n", area.String())
			// Throughput (smoothed) and the pipe rate.
			fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="#222" stroke-width="0.8" opacity="0.7"/>`+"\n", polyline(smooth(s.Through[d], 5), xAt, yRate, false))
			if hasRate(s.Rate[d]) {
				fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.8"/>`+"\n", polyline(s.Rate[d], xAt, yRate, true), col)
			}
			// Rate axis.
			for _, f := range []float64{0, 0.5, 1} {
				y := yRate(f * rateMax[d])
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="#555" text-anchor="end">%s</text>`+"\n", x0-4, y+3, rateLabel(f*rateMax[d]))
			}
			// Delay strip on a log scale, 1 ms to 4 s.
			dy0 := y0 + rateH
			yDelay := func(v float64) float64 {
				v = math.Min(math.Max(v, 1), 4000)
				return dy0 + delayH - delayH*math.Log10(v)/math.Log10(4000)
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#bbb"/>`+"\n", x0, dy0, x0+panelW, dy0)
			for _, m := range []float64{30, 100} {
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="4,3"/>`+"\n", x0, yDelay(m), x0+panelW, yDelay(m))
			}
			for _, m := range []float64{1, 30, 1000} {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="#555" text-anchor="end">%s</text>`+"\n", x0-4, yDelay(m)+3, delayLabel(m))
			}
			var dp strings.Builder
			fmt.Fprintf(&dp, "M%.1f,%.1f", xAt(0), dy0+delayH)
			for i, v := range s.DelayMax[d] {
				if v < 0 {
					v = 0
				}
				fmt.Fprintf(&dp, " L%.1f,%.1f", xAt(i), yDelay(v))
			}
			fmt.Fprintf(&dp, " L%.1f,%.1f Z", xAt(n-1), dy0+delayH)
			fmt.Fprintf(&b, `<path d="%s" fill="%s" opacity="0.35" stroke="none"/>`+"\n", dp.String(), col)
			fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1"/>`+"\n", polyline(s.Delay[d], xAt, yDelay, false), col)
			// Time axis on the last row.
			if ri == len(results)-1 {
				for t := 0.0; t <= secs+1e-9; t += tickStep(secs) {
					x := x0 + panelW*t/secs
					fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" fill="#555" text-anchor="middle">%.0f s</text>`+"\n", x, dy0+delayH+14, t)
				}
			}
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// beforeAfterH is the height of the headline and before/after panels.
const beforeAfterH = 250.0

// Shaped is the arm the before/after panel shows shaped: macake's law.
const Shaped = "ours"

// unshapedAndShaped returns the unshaped arm and the shaped one of
// results, nil when either is missing.
func unshapedAndShaped(results []*sim.Result) (before, after *sim.Result) {
	for _, r := range results {
		switch r.Controller {
		case "none":
			before = r
		case Shaped:
			after = r
		}
	}
	return before, after
}

// Headline says who wins on each loaded direction, in two lines: the
// 95th percentile of the added delay unshaped and shaped, then the
// throughput shaping kept.
func Headline(before, after *sim.Result, dirs []shape.Direction) (delay, kept string) {
	var parts, shares []string
	for _, d := range dirs {
		x, y := before.Dir[d], after.Dir[d]
		way := map[shape.Direction]string{shape.Download: "down", shape.Upload: "up"}[d]
		parts = append(parts, fmt.Sprintf("from %s to %s %s", msUnit(x.D95), msUnit(y.D95), way))
		if x.Goodput > 0 {
			shares = append(shares, fmt.Sprintf("%.0f %% of the %s's", 100*y.Goodput/x.Goodput, d))
		}
	}
	delay = "Shaped, the added delay (95th percentile) went " + strings.Join(parts, ", and ") + "."
	if len(shares) > 0 {
		kept = "Shaping kept " + strings.Join(shares, " and ") + " unshaped throughput."
	}
	return delay, kept
}

// beforeAfter draws the headline and, per loaded direction, the unshaped
// and the shaped added delay (the median of each 100 ms, smoothed over
// 0.5 s) on one linear axis.
func beforeAfter(b *strings.Builder, before, after *sim.Result, dirs []shape.Direction, left, panelW, gapX float64) {
	const y0, h = 132.0, 100.0
	delay, kept := Headline(before, after, dirs)
	fmt.Fprintf(b, `<text x="%.0f" y="56" font-size="18" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(delay))
	fmt.Fprintf(b, `<text x="%.0f" y="78" font-size="14">%s</text>`+"\n", left, html.EscapeString(kept))
	fmt.Fprintf(b, `<text x="%.0f" y="100" font-size="12" fill="#555">Added delay over time, unshaped (red) and shaped by macake (%s, blue), on one linear scale: the wait a video call or a game on the link feels.</text>`+"\n", left, Shaped)
	for di, d := range dirs {
		x0 := left + float64(di)*(panelW+gapX)
		bs, as := smooth(before.Series.Delay[d], 5), smooth(after.Series.Delay[d], 5)
		top := 0.0
		for _, v := range append(slices.Clone(bs), as...) {
			top = math.Max(top, v)
		}
		top = niceCeil(math.Max(top, 1))
		n := len(bs)
		xAt := func(i int) float64 { return x0 + panelW*float64(i)/float64(max(n-1, 1)) }
		yAt := func(v float64) float64 { return y0 + h - h*math.Min(math.Max(v, 0), top)/top }
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fafafa" stroke="#ddd"/>`+"\n", x0, y0, panelW, h)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="13" font-weight="bold">%s: added delay</text>`+"\n", x0, y0-8, d)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="12" fill="#333" text-anchor="end">95th percentile: <tspan fill="%s">unshaped %s</tspan> · <tspan fill="%s">shaped %s</tspan></text>`+"\n",
			x0+panelW, y0-8, palette["none"], msUnit(before.Dir[d].D95), colour(Shaped, 0), msUnit(after.Dir[d].D95))
		for _, f := range []float64{0, 0.5, 1} {
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", x0, yAt(f*top), x0+panelW, yAt(f*top))
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" fill="#555" text-anchor="end">%s</text>`+"\n", x0-4, yAt(f*top)+3, linearDelayLabel(f*top))
		}
		for _, r := range []struct {
			v   []float64
			col string
		}{{bs, palette["none"]}, {as, colour(Shaped, 0)}} {
			fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", polyline(r.v, xAt, yAt, false), r.col)
		}
	}
}

// linearDelayLabel labels a linear delay axis: "0", "250 ms", "1.5 s".
func linearDelayLabel(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1000:
		return fmt.Sprintf("%.3g s", v/1000)
	}
	return fmt.Sprintf("%.3g ms", v)
}

func hasRate(v []float64) bool {
	for _, x := range v {
		if x > 0 {
			return true
		}
	}
	return false
}

// polyline draws a series; step draws a staircase (pipe rates change in
// steps). Negative values (no data) break the line.
func polyline(v []float64, xAt func(int) float64, y func(float64) float64, step bool) string {
	var p strings.Builder
	pen := false
	for i, x := range v {
		if x < 0 {
			pen = false
			continue
		}
		switch {
		case !pen:
			fmt.Fprintf(&p, "M%.1f,%.1f", xAt(i), y(x))
			pen = true
		case step:
			fmt.Fprintf(&p, " H%.1f V%.1f", xAt(i), y(x))
		default:
			fmt.Fprintf(&p, " L%.1f,%.1f", xAt(i), y(x))
		}
	}
	if p.Len() == 0 {
		return "M0,0"
	}
	return p.String()
}

// smooth is a centred moving average over k bins.
func smooth(v []float64, k int) []float64 {
	out := make([]float64, len(v))
	for i := range v {
		var s float64
		n := 0
		for j := i - k/2; j <= i+k/2; j++ {
			if j >= 0 && j < len(v) && v[j] >= 0 {
				s += v[j]
				n++
			}
		}
		if n > 0 {
			out[i] = s / float64(n)
		}
	}
	return out
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1e6
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func rateLabel(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.1fG", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.0fM", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.0fk", bps/1e3)
	}
	return "0"
}

func delayLabel(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.0fs", v/1000)
	}
	return fmt.Sprintf("%.0fms", v)
}

func tickStep(secs float64) float64 {
	for _, s := range []float64{5, 10, 15, 30, 60, 120, 300, 600} {
		if secs/s <= 8 {
			return s
		}
	}
	return 1200
}

// msUnit formats a delay in ms with its unit.
func msUnit(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	return ms(v) + " ms"
}
