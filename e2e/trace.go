// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Step is one row of a capacity trace: from At on, the bottleneck carries
// Download and Upload bit/s.
type Step struct {
	// At is the step's start from the trace's beginning.
	At time.Duration
	// Download and Upload are the capacities in bit/s.
	Download, Upload int64
}

// Trace is a piecewise-constant capacity schedule for the ISP bottleneck,
// both directions. Each step holds until the next one; the trace ends at
// Length.
type Trace struct {
	// Name is where it came from (a file name).
	Name string
	// Steps start at 0 and increase strictly.
	Steps []Step
	// Length ends the last step.
	Length time.Duration
}

// maxTraceRows bounds a trace file: a 100 ms step for an hour.
const maxTraceRows = 36_000

// ParseTrace reads a trace in CSV: lines "seconds,download_mbit,upload_mbit"
// with times strictly increasing from 0; '#' starts a comment line; an
// optional header line names the columns. The last row ends the trace: its
// time is the trace's length and its rates are never in force. Errors say
// LINE: what is wrong.
func ParseTrace(name string, r io.Reader) (Trace, error) {
	t := Trace{Name: name}
	sc := bufio.NewScanner(r)
	line := 0
	var ends []Step
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if len(ends) == 0 && strings.HasPrefix(text, "seconds,") {
			continue
		}
		if len(ends) >= maxTraceRows {
			return Trace{}, fmt.Errorf("%s:%d: more than %d rows", name, line, maxTraceRows)
		}
		s, err := parseStep(text)
		if err != nil {
			return Trace{}, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		switch {
		case len(ends) == 0 && s.At != 0:
			return Trace{}, fmt.Errorf("%s:%d: the first row must be at 0 seconds, not %v", name, line, s.At)
		case len(ends) > 0 && s.At <= ends[len(ends)-1].At:
			return Trace{}, fmt.Errorf("%s:%d: time %v does not follow %v", name, line, s.At, ends[len(ends)-1].At)
		}
		ends = append(ends, s)
	}
	if err := sc.Err(); err != nil {
		return Trace{}, fmt.Errorf("%s: %w", name, err)
	}
	if len(ends) < 2 {
		return Trace{}, fmt.Errorf("%s: a trace needs at least two rows (the last one ends it)", name)
	}
	t.Steps = ends[:len(ends)-1]
	t.Length = ends[len(ends)-1].At
	return t, nil
}

func parseStep(text string) (Step, error) {
	f := strings.Split(text, ",")
	if len(f) != 3 {
		return Step{}, fmt.Errorf("want 3 fields (seconds,download_mbit,upload_mbit), got %d", len(f))
	}
	var v [3]float64
	for i, s := range f {
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return Step{}, fmt.Errorf("field %d: %q is not a number ≥ 0", i+1, s)
		}
		v[i] = x
	}
	if v[0] > 24*3600 {
		return Step{}, fmt.Errorf("time %g s is beyond a day", v[0])
	}
	for i, name := range []string{"download", "upload"} {
		if v[i+1] < 0.1 || v[i+1] > 10_000 {
			return Step{}, fmt.Errorf("%s %g Mbit/s is outside 0.1-10000", name, v[i+1])
		}
	}
	return Step{
		At:       time.Duration(math.Round(v[0]*1e3)) * time.Millisecond,
		Download: int64(math.Round(v[1] * 1e6)),
		Upload:   int64(math.Round(v[2] * 1e6)),
	}, nil
}

// ReadTrace parses a trace file.
func ReadTrace(path string) (Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return Trace{}, err
	}
	defer f.Close()
	return ParseTrace(path, f)
}

// At returns the step in force at d (the last one after the end).
func (t Trace) At(d time.Duration) Step {
	s := t.Steps[0]
	for _, x := range t.Steps {
		if x.At > d {
			break
		}
		s = x
	}
	return s
}

// Cut returns the first length of the trace (all of it when shorter).
func (t Trace) Cut(length time.Duration) Trace {
	if length >= t.Length {
		return t
	}
	c := Trace{Name: t.Name, Length: length}
	for _, s := range t.Steps {
		if s.At < length {
			c.Steps = append(c.Steps, s)
		}
	}
	return c
}

// Scale stretches or squeezes the trace in time to last length, keeping
// its shape (a 10 s step of a 30 s trace lasts 5 s at 15 s).
func (t Trace) Scale(length time.Duration) Trace {
	c := Trace{Name: t.Name, Length: length, Steps: make([]Step, len(t.Steps))}
	for i, s := range t.Steps {
		s.At = time.Duration(float64(s.At) * float64(length) / float64(t.Length))
		c.Steps[i] = s
	}
	return c
}

// ScaleRates multiplies every step's capacities by f (a slower link of the
// same shape, for a testbed that cannot carry the original's rates), no
// step below minTraceRate; the name says the factor.
func (t Trace) ScaleRates(f float64) Trace {
	c := Trace{Name: fmt.Sprintf("%s ×%g", t.Name, f), Length: t.Length, Steps: make([]Step, len(t.Steps))}
	for i, s := range t.Steps {
		s.Download = max(int64(float64(s.Download)*f), minTraceRate)
		s.Upload = max(int64(float64(s.Upload)*f), minTraceRate)
		c.Steps[i] = s
	}
	return c
}

// Min is the lowest capacity of one direction (download when download is
// true, else upload).
func (t Trace) Min(download bool) int64 {
	m := int64(math.MaxInt64)
	for _, s := range t.Steps {
		m = min(m, pick(download, s))
	}
	return m
}

// Max is the highest capacity of one direction.
func (t Trace) Max(download bool) int64 {
	var m int64
	for _, s := range t.Steps {
		m = max(m, pick(download, s))
	}
	return m
}

// Mean is the time-weighted mean capacity of one direction.
func (t Trace) Mean(download bool) int64 {
	var sum float64
	for i, s := range t.Steps {
		end := t.Length
		if i+1 < len(t.Steps) {
			end = t.Steps[i+1].At
		}
		sum += float64(pick(download, s)) * (end - s.At).Seconds()
	}
	return int64(sum / t.Length.Seconds())
}

func pick(download bool, s Step) int64 {
	if download {
		return s.Download
	}
	return s.Upload
}

// WriteTrace writes t in the format ParseTrace reads, after the comment
// lines.
func WriteTrace(w io.Writer, t Trace, comments ...string) error {
	bw := bufio.NewWriter(w)
	for _, c := range comments {
		fmt.Fprintf(bw, "# %s\n", c)
	}
	fmt.Fprintln(bw, "seconds,download_mbit,upload_mbit")
	row := func(at time.Duration, s Step) {
		fmt.Fprintf(bw, "%s,%s,%s\n", strconv.FormatFloat(at.Seconds(), 'f', -1, 64),
			strconv.FormatFloat(float64(s.Download)/1e6, 'f', -1, 64), strconv.FormatFloat(float64(s.Upload)/1e6, 'f', -1, 64))
	}
	for _, s := range t.Steps {
		row(s.At, s)
	}
	row(t.Length, t.Steps[len(t.Steps)-1])
	return bw.Flush()
}
