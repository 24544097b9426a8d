// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/controller/autoqueue"
)

// Pipe queue limits: a fixed size is never below four full-sized packets,
// and no queue is above what dnctl accepts. A rule's size is floored as
// `queue = "auto"` is (autoqueue.Floor: the larger of four
// packets and a few ms at the rate).
const (
	MinQueueBytes = 4 * dataBytes
	MaxQueueBytes = 1023 * 1024
)

// DefaultQueue is the rule `queue = "auto"` follows (autoqueue.Bytes):
// the BDP at the idle baseline, but no more than 20 ms of drain time, which
// won the simulator's comparison (docs/MEASUREMENTS.md), and on Linux's
// bfifo the sparse reserve (autoqueue.SparseReserve).
var DefaultQueue = QueueRule{BDP: true, Target: autoqueue.Target, Reserve: true}

// QueueRule sizes the pipe's byte queue at every rate change, as the
// daemon's `queue = "auto"` does. Sizes are rounded up to whole KiB, as
// dnctl takes them (after the floor, as autoqueue.Bytes does),
// and capped at MaxQueueBytes.
type QueueRule struct {
	// BDP sizes the queue to the bandwidth-delay product at the idle
	// baseline RTT (MaCake's rule).
	BDP bool
	// Target sizes the queue to drain in this time at the pipe rate (a
	// delay target). With BDP also set, the smaller of the two applies.
	Target time.Duration
	// Bytes, when set, is a fixed queue size (used as given).
	Bytes int64

	// The candidates of issue 24 (the user's packets first), tried in
	// the simulator before any reaches queue = "auto". Zero values keep
	// the floor of autoqueue.Floor.
	//
	// MinDrain is the floor in drain time at the rate (0: the auto
	// queue's, autoqueue.MinDrain) and Packets the floor in
	// full-sized packets (0: its four).
	MinDrain time.Duration
	Packets  int
	// PerFlow floors the queue at this many full-sized packets per bulk
	// flow of the direction: the queue must hold a few packets per flow,
	// or every flow's window collapses into drops. (The simulator knows
	// the flows; a daemon would have to count them.)
	PerFlow int
	// Achieved sizes the queue's drain times (its ceiling and its floor)
	// at the larger of the pipe's rate and the rate the interface
	// counters last showed (the
	// controller's achieved rate), so a cut far below what the flows were
	// sending does not also shrink the queue their windows sit in.
	Achieved bool
	// Adapt, when positive, grows the queue (×1.5, up to 8 times its
	// rule's size) while the pipe drops more than this share of the
	// packets it carries in 200 ms, and shrinks it back (÷1.25) after each
	// second without a drop: a queue sized on the loss it causes, which a
	// daemon reads in the pipe's counters.
	Adapt float64
	// RED, when set, makes the pipe drop early as dummynet's gred does
	// (`queue NKbytes gred 0.02/min_th/max_th/0.1`, min_th a fifth of the
	// limit and max_th three fifths), computed as the macOS kernel
	// computes it (gred.go): in 16.16 fixed point with integer slopes, a
	// packet's probability scaled by its length, and only on queues up to
	// 30 KiB, where the kernel's arithmetic does not wrap.
	RED bool
	// Reserve gives a bfifo pipe (Shaper htb) the sparse reserve of
	// Linux's auto queue, autoqueue.SparseReserve: whole full-sized
	// frames, and a frame less a byte that only smaller packets can use.
	// A dummynet pipe drops every packet once over its limit and takes
	// none. "auto" has it ("auto:noreserve" has not); the other rules
	// take it with ":reserve".
	Reserve bool
}

// QueueState is what the rules beyond a rate and a path may size from.
type QueueState struct {
	// Flows is the number of bulk flows in the pipe's direction.
	Flows int
	// Achieved is the rate the interface counters last showed, bit/s.
	Achieved int64
	// Scale multiplies the size (Adapt's; 0 means 1).
	Scale float64
}

// Size returns the queue limit in bytes for a pipe at rate bit/s on a path
// whose idle RTT is idle.
func (q QueueRule) Size(rate int64, idle time.Duration) int64 {
	return q.SizeFor(rate, idle, QueueState{})
}

// SizeFor is Size with what the rules beyond it use.
func (q QueueRule) SizeFor(rate int64, idle time.Duration, st QueueState) int64 {
	flows, achieved := st.Flows, st.Achieved
	if q.Bytes > 0 {
		return min(max(q.Bytes, MinQueueBytes), MaxQueueBytes)
	}
	drain := q.Target
	if q.BDP && (drain <= 0 || idle < drain) {
		drain = idle
	}
	at := rate
	if q.Achieved {
		at = max(rate, achieved)
	}
	floor := autoqueue.Floor(at, dataBytes)
	if q.MinDrain > 0 || q.Packets > 0 {
		floor = max(int64(max(q.Packets, 4))*dataBytes, int64(float64(at)/8*q.MinDrain.Seconds()))
		if q.MinDrain <= 0 {
			floor = max(floor, autoqueue.Floor(at, dataBytes))
		}
	}
	if q.PerFlow > 0 {
		floor = max(floor, int64(q.PerFlow*flows)*dataBytes)
	}
	b := max(int64(float64(at)/8*drain.Seconds()), floor)
	if st.Scale > 1 {
		b = int64(float64(b) * st.Scale)
	}
	b = (b + 1023) / 1024 * 1024
	return min(b, MaxQueueBytes)
}

// String returns the rule as ParseQueueRule reads it.
func (q QueueRule) String() string {
	base := QueueRule{BDP: q.BDP, Target: q.Target, Bytes: q.Bytes}
	if base.autoFamily() {
		base.Reserve = true
	}
	s := base.baseString()
	if q.MinDrain > 0 {
		s += ":floor=" + q.MinDrain.String()
	}
	if q.Packets > 0 {
		s += ":packets=" + strconv.Itoa(q.Packets)
	}
	if q.PerFlow > 0 {
		s += ":perflow=" + strconv.Itoa(q.PerFlow)
	}
	if q.Achieved {
		s += ":achieved"
	}
	if q.Adapt > 0 {
		s += ":adapt=" + strconv.FormatFloat(q.Adapt, 'g', -1, 64)
	}
	if q.RED {
		s += ":red"
	}
	switch {
	case q.Reserve && !base.autoFamily():
		s += ":reserve"
	case !q.Reserve && base.autoFamily():
		s += ":noreserve"
	}
	return s
}

// autoFamily is true for the rules printed as "auto" (with or without a
// moved ceiling), which take the reserve unless told not to.
func (q QueueRule) autoFamily() bool { return q.BDP && q.Target > 0 && q.Bytes == 0 }

func (q QueueRule) baseString() string {
	switch {
	case q.Bytes > 0:
		if q.Bytes%1024 == 0 {
			return fmt.Sprintf("%dKB", q.Bytes/1024)
		}
		return fmt.Sprintf("%dB", q.Bytes)
	case q == DefaultQueue:
		return "auto"
	case q.BDP && q.Target > 0:
		return "auto:target=" + q.Target.String()
	case q.Target > 0:
		return q.Target.String()
	}
	return "bdp"
}

// ParseQueueRule reads "auto" (DefaultQueue), "bdp", a delay target such
// as "10ms", or a size such as "256KB" or "6000B", optionally followed by
// the candidates' modifiers, each after a colon: "floor=10ms" (MinDrain),
// "packets=8", "perflow=3", "achieved", or "target=30ms" (auto's ceiling
// moved), e.g. "auto:perflow=3:achieved".
func ParseQueueRule(s string) (QueueRule, error) {
	base, mods, _ := strings.Cut(strings.TrimSpace(s), ":")
	q, err := parseQueueBase(base)
	if err != nil || mods == "" {
		return q, err
	}
	if q.Bytes > 0 {
		return QueueRule{}, fmt.Errorf("queue %q: a fixed size takes no modifiers", s)
	}
	for _, m := range strings.Split(mods, ":") {
		k, v, _ := strings.Cut(m, "=")
		var err error
		switch k {
		case "floor":
			q.MinDrain, err = time.ParseDuration(v)
		case "target":
			q.Target, err = time.ParseDuration(v)
		case "packets":
			q.Packets, err = strconv.Atoi(v)
		case "perflow":
			q.PerFlow, err = strconv.Atoi(v)
		case "reserve", "noreserve":
			if v != "" {
				err = errors.New("takes no value")
			}
			q.Reserve = k == "reserve"
		case "adapt":
			q.Adapt, err = strconv.ParseFloat(v, 64)
			if err == nil && !(q.Adapt > 0 && q.Adapt < 1) {
				err = errors.New("want a share between 0 and 1")
			}
		case "achieved", "red":
			if v != "" {
				err = errors.New("takes no value")
			}
			q.Achieved = q.Achieved || k == "achieved"
			q.RED = q.RED || k == "red"
		default:
			err = errors.New("unknown; want floor=D, target=D, packets=N, perflow=N, adapt=P, achieved, red, reserve or noreserve")
		}
		if err == nil && (q.MinDrain < 0 || q.Target < 0 || q.Packets < 0 || q.Packets > 1000 || q.PerFlow < 0 || q.PerFlow > 100) {
			err = errors.New("out of range")
		}
		if err != nil {
			return QueueRule{}, fmt.Errorf("queue %q: modifier %q: %v", s, m, err)
		}
	}
	return q, nil
}

func parseQueueBase(s string) (QueueRule, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "auto") || s == "" {
		return DefaultQueue, nil
	}
	if strings.EqualFold(s, "bdp") {
		return QueueRule{BDP: true}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return QueueRule{}, fmt.Errorf("queue delay target %q must be positive", s)
		}
		return QueueRule{Target: d}, nil
	}
	upper := strings.ToUpper(s)
	mult := int64(1)
	num := upper
	switch {
	case strings.HasSuffix(upper, "KB"):
		mult, num = 1024, strings.TrimSuffix(upper, "KB")
	case strings.HasSuffix(upper, "MB"):
		mult, num = 1024*1024, strings.TrimSuffix(upper, "MB")
	case strings.HasSuffix(upper, "B"):
		num = strings.TrimSuffix(upper, "B")
	default:
		return QueueRule{}, fmt.Errorf("queue %q: want bdp, a delay target like 10ms, or a size like 256KB", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return QueueRule{}, fmt.Errorf("queue %q: want bdp, a delay target like 10ms, or a size like 256KB", s)
	}
	if n > MaxQueueBytes/mult { // before multiplying, which could overflow
		return QueueRule{}, fmt.Errorf("queue %q is above dnctl's limit of 1023KB", s)
	}
	return QueueRule{Bytes: n * mult}, nil
}
