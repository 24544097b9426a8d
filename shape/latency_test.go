// SPDX-License-Identifier: Apache-2.0

package shape

import (
	"testing"
	"time"
)

func TestFormatLatency(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	for _, tc := range []struct {
		got, want string
	}{
		{FormatLatency(ms(12.34)), "12.3ms"},
		{FormatLatency(ms(0.04)), "<0.1ms"}, // never "0.0ms", as if nothing were measured (issue 27, item 8)
		{FormatLatency(ms(0.05)), "0.1ms"},
		{FormatLatency(0), "<0.1ms"},
		{FormatLatency(ms(1250)), "1.25s"},
		{FormatLatency(-1), "-"},
		{FormatLatencyChange(ms(412)), "+412.0ms"},
		{FormatLatencyChange(-ms(0.3)), "-0.3ms"},
		{FormatLatencyChange(-ms(0.01)), "+0.0ms"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
