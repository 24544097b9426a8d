// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"testing"
	"time"
)

func TestStallTimeoutFitsInsideThePhase(t *testing.T) {
	for _, tc := range []struct{ phase, want time.Duration }{
		{2 * time.Second, time.Second},
		{4 * time.Second, 2 * time.Second},
		{10 * time.Second, 5 * time.Second},
		{60 * time.Second, 5 * time.Second},
	} {
		if got := stallTimeout(tc.phase); got != tc.want {
			t.Errorf("stallTimeout(%v) = %v, want %v", tc.phase, got, tc.want)
		}
	}
}
