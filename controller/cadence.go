// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"time"

	"github.com/macake/macake/controller/tuning"
)

// Cadence is the timing derived from the tunables (AR-01).
type Cadence struct {
	// ResponseSpacing is PingInterval / Pingers: the aggregate spacing of
	// delay samples (50 ms at defaults, 20 samples/s).
	ResponseSpacing time.Duration
	// StallTimeout is StallDetection × ResponseSpacing (250 ms).
	StallTimeout time.Duration
	// MonitorInterval is the byte-counter sampling period after its floor
	// of 10 × the serialisation time of one packet each way at the base
	// rates.
	MonitorInterval time.Duration
}

// CadenceOf derives the sample spacing, stall timeout and monitor interval
// of c, in the controller's integer microseconds. c must be valid.
func CadenceOf(c tuning.Config) Cadence {
	p := newParams(c)
	return Cadence{
		ResponseSpacing: usDuration(p.spacing),
		StallTimeout:    usDuration(p.stallTimeout),
		MonitorInterval: usDuration(p.monitorFloored),
	}
}

// Warnings returns upstream's start-up warnings (AR-01): a bufferbloat
// refractory period shorter than the detection window's worth of samples
// (consecutive cuts then see overlapping evidence), and a response deadline
// shorter than two ping intervals (healthy reflectors collect offences).
// c must be valid.
func Warnings(c tuning.Config) []string {
	p := newParams(c)
	var w []string
	if p.bbRefractory < int64(p.window)*p.spacing {
		w = append(w, fmt.Sprintf("bufferbloat refractory period %v is shorter than the detection window (%d samples × %v = %v): cuts may act twice on the same bloat",
			usDuration(p.bbRefractory), p.window, usDuration(p.spacing), usDuration(int64(p.window)*p.spacing)))
	}
	if p.deadline < 2*p.pingInterval {
		w = append(w, fmt.Sprintf("reflector response deadline %v is shorter than 2 × the ping interval %v: healthy reflectors will collect offences",
			usDuration(p.deadline), usDuration(p.pingInterval)))
	}
	return w
}
