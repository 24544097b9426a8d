// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/macake/macake/controller/tuning"
	"github.com/macake/macake/shape"
)

// Status is the controller's overall state, for `macake status`.
type Status uint8

// Statuses. Running, Sleeping and Stalled are upstream's RUNNING, IDLE
// and STALL; Idle is RUNNING with both directions idle (counting toward
// sleep).
const (
	StatusRunning Status = iota
	StatusIdle
	StatusSleeping
	StatusStalled
)

var statusNames = [...]string{"running", "idle", "sleeping", "stalled"}

// String returns "running", "idle", "sleeping" or "stalled".
func (s Status) String() string { return nameOf(statusNames[:], int(s), "Status") }

// MarshalText writes the name, so status JSON reads "sleeping", not 2.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LoadClass is a direction's load class (AR-09): exactly three.
type LoadClass uint8

// Load classes.
const (
	LoadIdle LoadClass = iota
	LoadLow
	LoadHigh
)

var loadNames = [...]string{"idle", "low", "high"}

// String returns "idle", "low" or "high".
func (l LoadClass) String() string { return nameOf(loadNames[:], int(l), "LoadClass") }

// nameOf is the name of value v of type typ in names, or typ(v) for a
// value without one (an empty name is none).
func nameOf(names []string, v int, typ string) string {
	if v >= 0 && v < len(names) && names[v] != "" {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(v) + ")"
}

// MarshalText writes the name ("idle", "low", "high").
func (l LoadClass) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// State is a snapshot of the controller for status and metrics (the
// quantities of upstream's SUMMARY record, autorate.md §10, and more).
type State struct {
	Mode   tuning.Mode
	Status Status
	// Shaping is true when rate decisions go to the backend (autorate, or
	// balanced while engaged).
	Shaping bool
	// Engaged: see Controller.Engaged.
	Engaged bool
	// ProbingPaused is true while sleeping.
	ProbingPaused   bool
	ProbeGeneration uint64
	// Download and Upload are the per-direction states.
	Download, Upload DirectionState
	// Reflectors are the active slots, in slot order.
	Reflectors []ReflectorState
	// IdleRTT is the lowest down+up baseline over the active slots: the
	// idle round trip to the nearest reflector.
	IdleRTT time.Duration
	// SinceResponse is the time since the last reflector response.
	SinceResponse time.Duration
	// IdleFor is the idle time accumulated toward sleep.
	IdleFor time.Duration
	// MonitorInterval is the byte-counter sampling period to use.
	MonitorInterval time.Duration
	Counters        Counters
}

// Direction returns the state of direction d.
func (s State) Direction(d shape.Direction) DirectionState {
	if d == shape.Upload {
		return s.Upload
	}
	return s.Download
}

// DirectionState is one direction's part of State. Rates are bit/s.
type DirectionState struct {
	// Rate is the controller's rate; PipeRate is what the pipe gets for it
	// (lower with overhead compensation); LastApplied is what the backend
	// was last told (0 = nothing yet).
	Rate, PipeRate, LastApplied int64
	Min, Base, Max              int64
	MonitorOnly                 bool
	// Achieved is the achieved rate of the last sample, LoadPercent its
	// share of Rate, Load its class.
	Achieved    int64
	LoadPercent int
	Load        LoadClass
	// Baseline is the lowest one-way baseline over the active slots;
	// DeltaEWMA the mean of their delta EWMAs.
	Baseline, DeltaEWMA time.Duration
	// WindowAverage is the mean delay delta over the bufferbloat window,
	// Delayed how many of its samples are above DelayThreshold, and
	// Bufferbloat whether that reaches the vote threshold.
	WindowAverage time.Duration
	Delayed       int
	Bufferbloat   bool
	// The thresholds in force, serialisation-delay compensation included.
	DelayThreshold, FullIncreaseThreshold, FullCutThreshold time.Duration
	// RefractoryRemaining is the time until a cut or an increase may
	// happen again; DecayRemaining until the next decay step may.
	RefractoryRemaining, DecayRemaining time.Duration
}

// ReflectorState is one active slot.
type ReflectorState struct {
	Slot                       int
	Addr                       netip.Addr
	BaselineDown, BaselineUp   time.Duration
	DeltaEWMADown, DeltaEWMAUp time.Duration
	SinceResponse              time.Duration
	Offences                   int
	Responses                  uint64
}

// State returns a snapshot at the controller's latest input time. It
// allocates (the reflector list); it is not on the per-sample path.
func (c *Controller) State() State {
	t := c.now
	s := State{
		Mode:            c.cfg.Mode,
		Shaping:         c.shaping(),
		Engaged:         c.Engaged(),
		ProbingPaused:   c.ProbingPaused(),
		ProbeGeneration: c.probeGen,
		SinceResponse:   usDuration(max(0, t-c.lastResp)),
		IdleFor:         usDuration(c.idleAccum),
		MonitorInterval: c.MonitorInterval(),
		Counters:        c.counters,
		Reflectors:      make([]ReflectorState, len(c.slots)),
	}
	switch c.run {
	case sleeping:
		s.Status = StatusSleeping
	case stalled:
		s.Status = StatusStalled
	default:
		s.Status = StatusRunning
		if c.dir[0].class == LoadIdle && c.dir[1].class == LoadIdle {
			s.Status = StatusIdle
		}
	}
	idle := int64(-1)
	for i := range c.slots {
		sl := &c.slots[i]
		s.Reflectors[i] = ReflectorState{
			Slot:          i,
			Addr:          sl.addr,
			BaselineDown:  usDuration(sl.base[shape.Download]),
			BaselineUp:    usDuration(sl.base[shape.Upload]),
			DeltaEWMADown: usDuration(sl.ewma[shape.Download]),
			DeltaEWMAUp:   usDuration(sl.ewma[shape.Upload]),
			SinceResponse: usDuration(max(0, t-sl.lastResp)),
			Offences:      sl.nOffences,
			Responses:     sl.responses,
		}
		if sum := sl.base[shape.Download] + sl.base[shape.Upload]; idle < 0 || sum < idle {
			idle = sum
		}
	}
	s.IdleRTT = usDuration(max(idle, 0))
	s.Download = c.directionState(shape.Download, t)
	s.Upload = c.directionState(shape.Upload, t)
	return s
}

func (c *Controller) directionState(d shape.Direction, t int64) DirectionState {
	ds, dp := &c.dir[d], &c.p.dir[d]
	out := DirectionState{
		Rate:                  ds.rate * 1000,
		PipeRate:              c.pipeRate(ds) * 1000,
		LastApplied:           c.pipeRateOf(ds, ds.lastApplied) * 1000,
		Min:                   dp.minK * 1000,
		Base:                  dp.baseK * 1000,
		Max:                   dp.maxK * 1000,
		MonitorOnly:           dp.monitorOnly,
		Achieved:              ds.achieved * 1000,
		LoadPercent:           int(ds.loadPct),
		Load:                  ds.class,
		WindowAverage:         usDuration(ds.avg),
		Delayed:               ds.nDelayed,
		Bufferbloat:           ds.bloat,
		DelayThreshold:        usDuration(ds.tDelay),
		FullIncreaseThreshold: usDuration(ds.tUp),
		FullCutThreshold:      usDuration(ds.tDown),
		RefractoryRemaining:   usDuration(max(0, ds.tCut+c.p.bbRefractory-t)),
		DecayRemaining:        usDuration(max(0, ds.tDecay+c.p.decayRefractory-t)),
	}
	if len(c.slots) > 0 {
		lowest, sum := c.slots[0].base[d], int64(0)
		for i := range c.slots {
			lowest = min(lowest, c.slots[i].base[d])
			sum += c.slots[i].ewma[d]
		}
		out.Baseline = usDuration(lowest)
		out.DeltaEWMA = usDuration(sum / int64(len(c.slots)))
	}
	return out
}

func (c *Controller) pipeRateOf(ds *dirState, rate int64) int64 {
	if !c.p.compensate || rate == 0 {
		return rate
	}
	return shape.PipeKbit(rate, ds.ratio)
}
