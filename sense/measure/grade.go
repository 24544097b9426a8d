// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/macake/macake/sense/probe"
	"github.com/macake/macake/shape"
)

// Grade is a bufferbloat grade as the DSLReports and Waveform tests give
// it, from the latency a load adds: "A+" … "F".
type Grade string

// gradeBands are the grades' thresholds (DSLReports FAQ 17930; Waveform
// uses the same): the added latency is below a band's limit for its
// grade, and F is everything from 400 ms on. The one home of these
// numbers.
var gradeBands = []struct {
	below time.Duration
	grade Grade
}{
	{5 * time.Millisecond, "A+"},
	{30 * time.Millisecond, "A"},
	{60 * time.Millisecond, "B"},
	{200 * time.Millisecond, "C"},
	{400 * time.Millisecond, "D"},
}

// GradeF is the grade of 400 ms added or more.
const GradeF Grade = "F"

// GradeFor grades an added latency (less than nothing is A+).
func GradeFor(added time.Duration) Grade {
	for _, b := range gradeBands {
		if added < b.below {
			return b.grade
		}
	}
	return GradeF
}

// band is a grade's position, 0 for A+.
func band(g Grade) int {
	for i, b := range gradeBands {
		if b.grade == g {
			return i
		}
	}
	return len(gradeBands)
}

// RPM is the responsiveness of a working round trip in round trips per
// minute (the IPPM responsiveness draft; Apple's networkQuality), or -1
// for none.
func RPM(rtt time.Duration) float64 {
	if rtt <= 0 {
		return -1
	}
	return float64(time.Minute) / float64(rtt)
}

// maxShownRPM is the highest responsiveness a report prints as a number:
// a round trip under 1 ms (a LAN, a namespace) gives hundreds of
// thousands of round trips per minute, a figure no user can believe and
// that measures the host, not the link. The JSON keeps the number.
const maxShownRPM = 60000

// FormatRPM renders a responsiveness for people: "2116", "over 60000"
// (a round trip under 1 ms), "-" for none.
func FormatRPM(rpm float64) string {
	switch {
	case rpm < 0:
		return "-"
	case rpm >= maxShownRPM:
		return fmt.Sprintf("over %d", maxShownRPM)
	}
	return fmt.Sprintf("%.0f", rpm)
}

// RPMClass names a responsiveness as the draft classifies it: poor below
// 300 RPM (over 200 ms), fair to 1000, good to 6000 (60 to 10 ms),
// excellent from 6000.
func RPMClass(rpm float64) string {
	switch {
	case rpm < 0:
		return ""
	case rpm < 300:
		return "poor"
	case rpm < 1000:
		return "fair"
	case rpm < 6000:
		return "good"
	}
	return "excellent"
}

// What makes a grade firm: every loaded window this long and this full,
// few probes lost, and an idle jitter that cannot move the grade.
const (
	firmSteady  = 5 * time.Second
	firmReplies = 20
	firmLoss    = 0.05
)

// PhaseGrade is one load's grade and responsiveness.
type PhaseGrade struct {
	// Grade is "" when no target answered under that load.
	Grade Grade `json:"grade"`
	// AddedP50 is the latency graded: loaded minus idle median, like for
	// like, the median over the targets.
	AddedP50 *int64 `json:"added_p50_us"`
	// RPM is the responsiveness under that load: a minute over the
	// working round trip (the loaded round trips' 95 % trimmed mean, the
	// median over the targets); Responsiveness its class.
	RPM            *float64 `json:"rpm"`
	Responsiveness string   `json:"responsiveness,omitempty"`

	added time.Duration
	rpm   float64
}

// Grades are a load test's grades: each direction alone, both at once,
// and the overall grade the consumer tests print, with how far to trust
// them.
type Grades struct {
	Download PhaseGrade `json:"download"`
	Upload   PhaseGrade `json:"upload"`
	Both     PhaseGrade `json:"both"`
	// Overall is Waveform's grade: of the mean of the download's and the
	// upload's added latency.
	Overall Grade `json:"overall"`
	// IdleRPM is the responsiveness of the idle link, for scale: even a
	// perfect shaper cannot beat the path's own round trip.
	IdleRPM *float64 `json:"idle_rpm"`
	// Confidence is "high", or "low" with Notes saying why.
	Confidence string   `json:"confidence"`
	Notes      []string `json:"notes,omitempty"`
}

// phaseGrade grades one loaded window against the idle one.
func phaseGrade(pl PhaseLatency) PhaseGrade {
	var g PhaseGrade
	g.added, g.rpm = -1, -1
	if pl.Added.Targets > 0 {
		g.added, g.Grade = pl.Added.P50, GradeFor(pl.Added.P50)
		g.AddedP50 = jsonMicros(pl.Added.P50)
	}
	if rtt := medianOf(pl.Targets, tm95); rtt > 0 {
		g.rpm = RPM(rtt)
		v := math.Round(g.rpm)
		g.RPM, g.Responsiveness = &v, RPMClass(g.rpm)
	}
	return g
}

func tm95(s probe.Summary) time.Duration { return s.TM95 }

// NewGrades grades a load test's result.
func NewGrades(res LoadResult) Grades {
	g := Grades{Download: phaseGrade(res.DownLatency), Upload: phaseGrade(res.UpLatency), Both: phaseGrade(res.BothLatency)}
	if d, u := g.Download.added, g.Upload.added; g.Download.Grade != "" && g.Upload.Grade != "" {
		g.Overall = GradeFor((d + u) / 2)
	}
	if idle := medianOf(res.Idle, tm95); idle > 0 {
		v := math.Round(RPM(idle))
		g.IdleRPM = &v
	}
	g.Notes = confidenceNotes(res, g)
	g.Confidence = "high"
	if len(g.Notes) > 0 {
		g.Confidence = "low"
	}
	return g
}

// confidenceNotes says what makes the grades shaky: a load too short or
// too thinly sampled to trust, probes lost under load (the grade then
// flatters the link: the worst replies never came), an idle jitter wide
// enough to move a grade across a band, or targets that disagree.
func confidenceNotes(res LoadResult, g Grades) []string {
	var notes, short []string
	shortest := time.Duration(math.MaxInt64)
	jitter := medianOf(res.Idle, func(s probe.Summary) time.Duration { return s.P90 - s.P50 })
	for _, ph := range []struct {
		name   string
		window time.Duration
		pl     PhaseLatency
		g      PhaseGrade
	}{
		{"download", steady(res.Download.SteadyFrom, res.Download.SteadyTo), res.DownLatency, g.Download},
		{"upload", steady(res.Upload.SteadyFrom, res.Upload.SteadyTo), res.UpLatency, g.Upload},
		{"both-ways", res.BothWindow(), res.BothLatency, g.Both},
	} {
		if ph.g.Grade == "" {
			notes = append(notes, fmt.Sprintf("no latency target answered under the %s load: that grade is unknown", ph.name))
			continue
		}
		replies, lost := 0, 0
		var perTarget []Grade
		for a, s := range ph.pl.Targets {
			replies, lost = replies+s.Samples, lost+s.Lost
			if i, ok := res.Idle[a]; ok && i.Samples > 0 && s.Samples > 0 {
				perTarget = append(perTarget, GradeFor(s.P50-i.P50))
			}
		}
		perReplies := replies / max(1, len(ph.pl.Targets))
		switch {
		case ph.window < firmSteady:
			short, shortest = append(short, ph.name), min(shortest, ph.window)
		case perReplies < firmReplies:
			notes = append(notes, fmt.Sprintf("only %d replies per target under the %s load", perReplies, ph.name))
		}
		if total := replies + lost; total > 0 && float64(lost)/float64(total) > firmLoss {
			notes = append(notes, fmt.Sprintf("%.0f %% of the probes got no reply under the %s load: the grade flatters the link", 100*float64(lost)/float64(total), ph.name))
		}
		if jitter > 0 {
			if lo, hi := GradeFor(ph.g.added-jitter), GradeFor(ph.g.added+jitter); lo != hi {
				notes = append(notes, fmt.Sprintf("the idle jitter (±%s) makes the %s grade anything from %s to %s", shape.FormatLatency(jitter), ph.name, lo, hi))
			}
		}
		if len(perTarget) > 1 {
			slices.SortFunc(perTarget, func(a, b Grade) int { return band(a) - band(b) })
			if best, worst := perTarget[0], perTarget[len(perTarget)-1]; band(worst)-band(best) > 1 {
				notes = append(notes, fmt.Sprintf("the latency targets disagree about the %s load (from %s to %s)", ph.name, best, worst))
			}
		}
	}
	if len(short) > 0 {
		loads := strings.Join(short, " and ") + " load"
		if len(short) == 3 {
			loads = "loads"
		} else if len(short) > 1 {
			loads += "s"
		}
		notes = append([]string{fmt.Sprintf("the %s ran only %s at full rate (--duration 10s or more gives a firmer grade)", loads, shortest.Round(100*time.Millisecond))}, notes...)
	}
	return notes
}

// gradeLegend spells the bands: "A+ under 5ms, A under 30ms, …, else F".
func gradeLegend() string {
	var parts []string
	for _, b := range gradeBands {
		parts = append(parts, fmt.Sprintf("%s under %dms", b.grade, b.below.Milliseconds()))
	}
	return strings.Join(parts, ", ") + ", else " + string(GradeF)
}

func steady(from, to time.Time) time.Duration {
	if to.Before(from) {
		return 0
	}
	return to.Sub(from)
}

// writeText prints the grades, the responsiveness and, when it is low,
// the confidence, as rows whose names are padded to width.
func (g Grades) writeText(w io.Writer, width int) {
	row := func(name, text string) { fmt.Fprintf(w, "%-*s %s\n", width, name, text) }
	var parts []string
	for _, p := range []struct {
		name string
		g    PhaseGrade
	}{{"download", g.Download}, {"upload", g.Upload}, {"both", g.Both}} {
		if p.g.Grade == "" {
			parts = append(parts, p.name+" -")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", p.name, p.g.Grade, shape.FormatLatencyChange(p.g.added)))
	}
	overall := ""
	if g.Overall != "" {
		overall = ", overall " + string(g.Overall)
	}
	row("Grades", strings.Join(parts, ", ")+overall)
	row("", "(bufferbloat, from the added median: "+gradeLegend()+")")
	resp := func(p PhaseGrade) string {
		if p.RPM == nil {
			return "-"
		}
		return FormatRPM(*p.RPM)
	}
	line := fmt.Sprintf("%s RPM", resp(g.Both))
	if g.Both.Responsiveness != "" {
		line += " (" + g.Both.Responsiveness + ")"
	}
	line += fmt.Sprintf(" with both directions loaded; download %s, upload %s", resp(g.Download), resp(g.Upload))
	if g.IdleRPM != nil {
		line += fmt.Sprintf(", idle %s RPM", FormatRPM(*g.IdleRPM))
	}
	row("Responsiveness", line)
	if len(g.Notes) > 0 {
		row("Confidence", "low: "+strings.Join(g.Notes, "; "))
	}
}
