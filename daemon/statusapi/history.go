// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"math"
	"strconv"
	"time"
)

// Query says what a status request wants beyond the document itself.
type Query struct {
	// History adds each link's recent history (Link.History), from after
	// Since when it is set (a page that has the older samples already).
	History bool
	Since   time.Time
	// Events adds the daemon's last log events (Status.Events).
	Events bool
}

// Value is one number of a history series; NaN (nothing measured then,
// e.g. before the controller's first reply) is null in JSON.
type Value float64

// Missing is the Value of a sample that measured nothing.
var Missing = Value(math.NaN())

// IsMissing reports whether v measured nothing.
func (v Value) IsMissing() bool { return math.IsNaN(float64(v)) }

// MarshalJSON writes the number, or null when it is missing.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.IsMissing() || math.IsInf(float64(v), 0) {
		return []byte("null"), nil
	}
	// encoding/json's choice: plain digits, exponents only at the edges.
	f, abs, format := float64(v), math.Abs(float64(v)), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(nil, f, format, -1, 64), nil
}

// UnmarshalJSON reads a number, or null as missing.
func (v *Value) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = Missing
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	*v = Value(f)
	return nil
}

// HistorySample is one moment of a link: what the daemon records once a
// step. Rates are bit/s, delays seconds; a value the link did not measure
// then is Missing.
type HistorySample struct {
	At time.Time
	// ShaperDown and ShaperUp are the shapers' rates (0 while not
	// installed).
	ShaperDown, ShaperUp Value
	// AchievedDown and AchievedUp are the traffic the link carried.
	AchievedDown, AchievedUp Value
	// Baseline is the idle round trip to the nearest reflector; RTT the
	// round trip now (the baseline plus both directions' delay above it).
	Baseline, RTT Value
	// DelayDown and DelayUp are each direction's one-way delay above its
	// baseline: the mean over the controller's bufferbloat window.
	DelayDown, DelayUp Value
}

// History is a link's recent samples, oldest first, as columns of equal
// length: the shape a chart or a sparkline reads.
type History struct {
	// StepSeconds is the time between samples.
	StepSeconds float64 `json:"step_seconds"`
	// Times are the samples' times in Unix milliseconds.
	Times        []int64 `json:"times_unix_ms"`
	ShaperDown   []Value `json:"download_rate_bits_per_second"`
	ShaperUp     []Value `json:"upload_rate_bits_per_second"`
	AchievedDown []Value `json:"download_achieved_bits_per_second"`
	AchievedUp   []Value `json:"upload_achieved_bits_per_second"`
	Baseline     []Value `json:"baseline_rtt_seconds"`
	RTT          []Value `json:"rtt_seconds"`
	DelayDown    []Value `json:"download_delay_seconds"`
	DelayUp      []Value `json:"upload_delay_seconds"`
}

// NewHistory lays samples out as columns.
func NewHistory(step time.Duration, samples []HistorySample) *History {
	n := len(samples)
	h := &History{StepSeconds: step.Seconds(), Times: make([]int64, n),
		ShaperDown: make([]Value, n), ShaperUp: make([]Value, n), AchievedDown: make([]Value, n), AchievedUp: make([]Value, n),
		Baseline: make([]Value, n), RTT: make([]Value, n), DelayDown: make([]Value, n), DelayUp: make([]Value, n)}
	for i, s := range samples {
		h.Times[i] = s.At.UnixMilli()
		h.ShaperDown[i], h.ShaperUp[i] = s.ShaperDown, s.ShaperUp
		h.AchievedDown[i], h.AchievedUp[i] = s.AchievedDown, s.AchievedUp
		h.Baseline[i], h.RTT[i] = s.Baseline, s.RTT
		h.DelayDown[i], h.DelayUp[i] = s.DelayDown, s.DelayUp
	}
	return h
}

// Event is one line of the daemon's log, as the status page lists it.
type Event struct {
	Time  time.Time `json:"time"`
	Level string    `json:"level"`
	// Event is the log's event word (cut, engage, drift_repaired, ...),
	// "" for lines without one.
	Event   string `json:"event,omitempty"`
	Link    string `json:"link,omitempty"`
	Message string `json:"message"`
	// Attrs are the line's other attributes, as the text log prints them.
	Attrs map[string]string `json:"attrs,omitempty"`
	// Summary is the line for a person (EventSummary), as status and the
	// status page print it.
	Summary string `json:"summary"`
}
