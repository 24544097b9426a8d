// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package linkfacts

import "time"

// suspendedTime is not available here: on macOS the watcher compares the
// wall clock with Go's monotonic clock, which is mach_absolute_time and
// stops while the machine sleeps.
func suspendedTime() (time.Duration, bool) { return 0, false }
