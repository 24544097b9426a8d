// SPDX-License-Identifier: Apache-2.0

package check

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/selftest/loopback"
)

func TestMeasuredTakesADifferingMeasurementAgain(t *testing.T) {
	e := loopback.Expectation{RateBits: 20_000_000, QueueBytes: 256 << 10} // Q/R 104.9 ms
	at := func(loaded time.Duration) loopback.Measurement {
		return loopback.Measurement{IdleRTT: []time.Duration{time.Millisecond}, LoadedRTT: []time.Duration{loaded},
			Bytes: 19_000_000 / 8 * 3, Window: 3 * time.Second}
	}
	good, drained := at(85*time.Millisecond), at(30*time.Millisecond)
	slow, slowDrained := at(85*time.Millisecond), drained
	slow.Bytes /= 3
	slowDrained.Bytes /= 3
	fast := at(85 * time.Millisecond)
	fast.Bytes = 40_000_000 / 8 * 3
	for _, tt := range []struct {
		name   string
		runs   []loopback.Measurement
		err    error
		status Status
		calls  int
		detail string
	}{
		{name: "as modelled", runs: []loopback.Measurement{good}, status: OK, calls: 1},
		{name: "once drained, then as modelled", runs: []loopback.Measurement{drained, good}, status: OK, calls: 2,
			detail: "the first measurement differed (19.0 Mbit/s, queueing delay +29.0 ms (idle RTT 1.0 ms): the queueing delay is 28 %"},
		{name: "short of its queue twice: load can do that", runs: []loopback.Measurement{drained, drained}, status: Inconclusive, calls: 2,
			detail: "twice: first 19.0 Mbit/s"},
		{name: "slow and short of its queue twice: load can do that", runs: []loopback.Measurement{slowDrained, slowDrained}, status: Inconclusive, calls: 2,
			detail: "run the selftest again when the machine is idle"},
		{name: "slow with its queue full twice: the shaper's rate", runs: []loopback.Measurement{slow, slow}, status: Differs, calls: 2,
			detail: "the rate is 32 %"},
		{name: "faster than its rate twice: no load does that", runs: []loopback.Measurement{fast, fast}, status: Differs, calls: 2,
			detail: "twice: first 40.0 Mbit/s"},
		{name: "a measurement that fails is an error", err: errors.New("connection refused"), status: Error, calls: 1,
			detail: "measuring: connection refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			r := Measured(context.Background(), func(context.Context) (loopback.Measurement, error) {
				calls++
				if tt.err != nil {
					return loopback.Measurement{}, tt.err
				}
				return tt.runs[calls-1], nil
			}, e)
			if r.Status != tt.status || calls != tt.calls || !strings.Contains(r.Detail, tt.detail) {
				t.Errorf("%s after %d measurements, detail %q; want %s after %d, detail with %q", r.Status, calls, r.Detail, tt.status, tt.calls, tt.detail)
			}
		})
	}
}
