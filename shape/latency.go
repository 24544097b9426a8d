// SPDX-License-Identifier: Apache-2.0

package shape

import (
	"fmt"
	"time"
)

// FormatLatency formats a latency with 0.1 ms resolution: "12.3ms",
// "0.1ms", "1.25s"; "-" for a missing value (-1, as Percentile
// reports it), so that no latency is ever shown as a made-up zero; and
// "<0.1ms" for one too short to show at that resolution (a link in a
// namespace, a LAN), never "0.0ms", which reads as nothing measured.
func FormatLatency(d time.Duration) string {
	if d == -1 {
		return "-"
	}
	if d < 0 {
		return "-" + FormatLatency(-d)
	}
	if d < latencyResolution/2 {
		return "<0.1ms"
	}
	return formatLatency(d)
}

// latencyResolution is the finest step FormatLatency shows.
const latencyResolution = 100 * time.Microsecond

func formatLatency(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// FormatLatencyChange is FormatLatency with a sign, for latency added or
// removed: "+412.0ms", "-0.3ms", and "+0.0ms" rather than "-0.0ms" for
// what rounds to nothing.
func FormatLatencyChange(d time.Duration) string {
	s := formatLatency(d.Abs())
	if d < 0 && s != "0.0ms" {
		return "-" + s
	}
	return "+" + s
}
