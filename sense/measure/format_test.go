// SPDX-License-Identifier: Apache-2.0

package measure

import "testing"

func TestHumanUnits(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{HumanDuration(ms(12.34)), "12.3ms"},
		{HumanDuration(ms(0.04)), "0.0ms"},
		{HumanDuration(ms(1250)), "1.25s"},
		{HumanDuration(-1), "-"},
		{SignedDuration(ms(412)), "+412.0ms"},
		{SignedDuration(-ms(0.3)), "-0.3ms"},
		{SignedDuration(-ms(0.01)), "+0.0ms"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
