// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"time"
)

// jsonMicros converts for JSON: integer microseconds, null when missing
// (the -1 of probe.Percentile).
func jsonMicros(d time.Duration) *int64 {
	if d == -1 {
		return nil
	}
	v := d.Microseconds()
	return &v
}
