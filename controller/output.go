// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/macake/macake/shape"
)

// Reason says why a decision changes a rate.
type Reason uint8

// Decision reasons.
const (
	ReasonNone Reason = iota
	// ReasonStart applies the start rate once, before the first response.
	ReasonStart
	// ReasonCut is a bufferbloat cut.
	ReasonCut
	// ReasonIncrease is a high-load increase without bufferbloat.
	ReasonIncrease
	// ReasonDecay moves an above-base rate toward base under low load.
	ReasonDecay
	// ReasonRecover moves a below-base rate toward base under low load.
	ReasonRecover
	// ReasonSleepMinimum sets the minimum on sleep (MinRatesOnSleep).
	ReasonSleepMinimum
	// ReasonSleepBase sets base on sleep (Improvements.SleepAtBase).
	ReasonSleepBase
	// ReasonStallMinimum sets the minimum at the global ping timeout (MinRatesOnSleep).
	ReasonStallMinimum
	// ReasonEngage applies the rate when balanced mode engages the shaper.
	ReasonEngage
	// ReasonRetry resends a rate whose apply failed (Improvements.SurfaceBackendErrors).
	ReasonRetry
)

var reasonNames = [...]string{"none", "start", "cut", "increase", "decay", "recover",
	"sleep-minimum", "sleep-base", "stall-minimum", "engage", "retry"}

// String returns a short lower-case name, e.g. "cut".
func (r Reason) String() string { return nameOf(reasonNames[:], int(r), "Reason") }

// MarshalText writes the name, e.g. "cut".
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Decision asks the backend to set one direction's pipe to Rate.
type Decision struct {
	Direction shape.Direction
	// Rate is the pipe rate in bit/s, a whole number of kbit/s. With
	// overhead compensation it is below the controller's rate (see PipeRate).
	Rate   int64
	Reason Reason
}

// String is e.g. "download 20800 kbit/s (increase)".
func (d Decision) String() string {
	return fmt.Sprintf("%s %d kbit/s (%s)", d.Direction, d.Rate/1000, d.Reason)
}

// EventKind is the kind of a controller event.
type EventKind uint8

// Controller events.
const (
	// EventEngage: balanced mode engages the shaper (standing queue).
	EventEngage EventKind = iota + 1
	// EventRelease: balanced mode releases the shaper (latency clean).
	EventRelease
	// EventSleep: sustained idle; probing stops (ProbingPaused is true).
	EventSleep
	// EventWake: traffic resumed; probing starts again.
	EventWake
	// EventStall: no responses and no traffic; rates are frozen.
	EventStall
	// EventStallEnd: responses or traffic came back.
	EventStallEnd
	// EventProbeRestart: the prober should restart its probes.
	EventProbeRestart
	// EventReflectorReplaced: slot Slot now probes New instead of Old.
	EventReflectorReplaced
)

// ReplaceCause says why a reflector was replaced.
type ReplaceCause uint8

// Replacement causes (autorate.md §8.1).
const (
	// CauseOffences: too many health checks without a response.
	CauseOffences ReplaceCause = iota + 1
	// CauseComparison: its baseline or delta EWMA is worse than the best slot's.
	CauseComparison
	// CauseRotation: the periodic random rotation.
	CauseRotation
)

var causeNames = [...]string{"", "missed health checks", "worse than the best reflector", "periodic rotation"}

// String describes the cause in a few words.
func (c ReplaceCause) String() string { return nameOf(causeNames[:], int(c), "ReplaceCause") }

// Event is something a log or the prober should hear about. Only the
// fields named in its kind's comment are set. Events carry values, not
// text, so producing one never allocates; String formats the log line.
type Event struct {
	Kind EventKind
	// Duration: engage, how long the standing queue lasted; release, how
	// long latency was clean; sleep, the accumulated idle time; stall,
	// the time since the last response; probe restart, the time since the
	// last response.
	Duration time.Duration
	// Delay: engage, the mean one-way delay above baseline during the
	// standing queue (the worse direction's window average).
	Delay time.Duration
	// Down and Up: wake and stall end, the achieved rates in bit/s.
	Down, Up int64
	// Slot, Old, New and Cause: reflector replaced.
	Slot     int
	Old, New netip.Addr
	Cause    ReplaceCause
}

// String is the log line for the event, e.g.
// "standing queue for 4s (delay +18.5 ms one-way) - engaging shaper".
func (e Event) String() string {
	switch e.Kind {
	case EventEngage:
		return fmt.Sprintf("standing queue for %s (delay %+.1f ms one-way) - engaging shaper", seconds(e.Duration), ms(e.Delay))
	case EventRelease:
		return fmt.Sprintf("latency clean for %s - releasing shaper", seconds(e.Duration))
	case EventSleep:
		return fmt.Sprintf("idle for %s - sleeping, probes stopped", seconds(e.Duration))
	case EventWake:
		return fmt.Sprintf("traffic resumed (download %d kbit/s, upload %d kbit/s) - waking, probes started", e.Down/1000, e.Up/1000)
	case EventStall:
		return fmt.Sprintf("no reflector response for %s and no traffic - stalled, rates frozen", seconds(e.Duration))
	case EventStallEnd:
		return fmt.Sprintf("responses or traffic resumed (download %d kbit/s, upload %d kbit/s) - running", e.Down/1000, e.Up/1000)
	case EventProbeRestart:
		return fmt.Sprintf("no reflector response for %s - restarting probes", seconds(e.Duration))
	case EventReflectorReplaced:
		if e.Old == e.New {
			return fmt.Sprintf("reflector %s in slot %d: %s, but no spare reflector - kept", e.Old, e.Slot, e.Cause)
		}
		return fmt.Sprintf("reflector %s in slot %d replaced by %s (%s)", e.Old, e.Slot, e.New, e.Cause)
	}
	return fmt.Sprintf("EventKind(%d)", int(e.Kind))
}

// seconds formats a duration as whole seconds, or with one decimal when
// that matters: "4s", "4.1s", "60s".
func seconds(d time.Duration) string {
	d = d.Round(100 * time.Millisecond)
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// maxEvents bounds the events one input can produce (at most four can
// happen together: engage or release, sleep, a replacement, a restart).
const maxEvents = 4

// Output is what one input produced: at most one decision per direction,
// which together form one backend update (AR-21), and a few events. It is
// a plain value so the per-sample path never allocates.
type Output struct {
	decisions [2]Decision
	events    [maxEvents]Event
	nd, ne    uint8
}

// Decisions returns the rate changes to apply, download first.
func (o *Output) Decisions() []Decision { return o.decisions[:o.nd] }

// Events returns what happened, in order.
func (o *Output) Events() []Event { return o.events[:o.ne] }

// Empty reports whether there is nothing to apply and nothing to log.
func (o *Output) Empty() bool { return o.nd == 0 && o.ne == 0 }

// addDecision adds d, replacing an earlier decision for the same
// direction in this output (e.g. a rate step followed by sleep's minimum):
// the backend only needs the final rate.
func (o *Output) addDecision(d Decision) {
	for i := range o.decisions[:o.nd] {
		if o.decisions[i].Direction == d.Direction {
			o.decisions[i] = d
			return
		}
	}
	if int(o.nd) < len(o.decisions) {
		o.decisions[o.nd] = d
		o.nd++
	}
}

func (o *Output) addEvent(e Event) bool {
	if int(o.ne) < len(o.events) {
		o.events[o.ne] = e
		o.ne++
		return true
	}
	return false
}
