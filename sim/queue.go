// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/controller"
)

// Pipe queue limits: a fixed size is never below four full-sized packets,
// and no queue is above what dnctl accepts. A rule's size is floored as
// `queue = "auto"` is (controller.AutoQueueFloor: the larger of four
// packets and a few ms at the rate).
const (
	MinQueueBytes = 4 * dataBytes
	MaxQueueBytes = 1023 * 1024
)

// DefaultQueue is the rule `queue = "auto"` follows (controller.AutoQueueBytes):
// the BDP at the idle baseline, but no more than 20 ms of drain time, which
// won the simulator's comparison (docs/MEASUREMENTS.md).
var DefaultQueue = QueueRule{BDP: true, Target: 20 * time.Millisecond}

// QueueRule sizes the pipe's byte queue at every rate change, as the
// daemon's `queue = "auto"` does. Sizes are rounded up to whole KiB, as
// dnctl takes them (after the floor, as controller.AutoQueueBytes does),
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
}

// Size returns the queue limit in bytes for a pipe at rate bit/s on a path
// whose idle RTT is idle.
func (q QueueRule) Size(rate int64, idle time.Duration) int64 {
	if q.Bytes > 0 {
		return min(max(q.Bytes, MinQueueBytes), MaxQueueBytes)
	}
	drain := q.Target
	if q.BDP && (drain <= 0 || idle < drain) {
		drain = idle
	}
	b := max(int64(float64(rate)/8*drain.Seconds()), controller.AutoQueueFloor(rate, dataBytes))
	b = (b + 1023) / 1024 * 1024
	return min(b, MaxQueueBytes)
}

// String returns the rule as ParseQueueRule reads it.
func (q QueueRule) String() string {
	switch {
	case q.Bytes > 0:
		if q.Bytes%1024 == 0 {
			return fmt.Sprintf("%dKB", q.Bytes/1024)
		}
		return fmt.Sprintf("%dB", q.Bytes)
	case q == DefaultQueue:
		return "auto"
	case q.BDP && q.Target > 0:
		return "min(bdp, " + q.Target.String() + ")"
	case q.Target > 0:
		return q.Target.String()
	}
	return "bdp"
}

// ParseQueueRule reads "auto" (DefaultQueue), "bdp", a delay target such
// as "10ms", or a size such as "256KB" or "6000B".
func ParseQueueRule(s string) (QueueRule, error) {
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
