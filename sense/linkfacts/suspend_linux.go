// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"time"

	"golang.org/x/sys/unix"
)

// suspendedTime is CLOCK_BOOTTIME minus CLOCK_MONOTONIC: the time spent in
// suspend since boot. Unlike the wall clock it never jumps when someone
// sets the time.
func suspendedTime() (time.Duration, bool) {
	var boot, mono unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot) != nil || unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono) != nil {
		return 0, false
	}
	return time.Duration(boot.Nano() - mono.Nano()), true
}
