// SPDX-License-Identifier: Apache-2.0

package shape

import "testing"

func TestKbit(t *testing.T) {
	for bits, want := range map[int64]int64{
		-1500: 0, 0: 0, 1: 0, 499: 0, 500: 1, 1499: 1, 1500: 2,
		1_234_567: 1235, 177_510_999: 177_511, 2_147_483_647: 2_147_484,
	} {
		if got := Kbit(bits); got != want {
			t.Errorf("Kbit(%d) = %d, want %d", bits, got, want)
		}
	}
}
