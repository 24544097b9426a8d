// SPDX-License-Identifier: Apache-2.0

package shape

// Rate arithmetic that the controller, the reconciler and every backend
// share. Rates are int64 bit/s, as in Pipe.RateBits. Each rule has one
// home here, so a one-shot apply, a running controller and a re-plan
// arrive at the same number to the unit, and every command prints a rate
// the same way.

// Kbit rounds a rate in bit/s to the nearest whole kbit/s (halves up), and
// returns 0 for a rate that is not positive. Whole kbit/s is the step
// dummynet keeps (`bw NKbit/s`) and the unit the controller's law runs in,
// so every place that rounds must round alike: otherwise a pipe set by
// the controller and the same rate planned by apply differ by 1 kbit/s
// and the drift check fights the controller.
func Kbit(bits int64) int64 {
	if bits <= 0 {
		return 0
	}
	return (bits + 500) / 1000
}
