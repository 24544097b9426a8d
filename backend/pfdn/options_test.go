// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"testing"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/shape"
)

// TestPipeRangeRoundTrip pins the numbering (upload First+2·slot, download
// the next) and that Slot and Direction invert Pipe for every pipe of the
// range, and refuse the odd pipe left over at the end and pipes outside.
func TestPipeRangeRoundTrip(t *testing.T) {
	r := pfdn.PipeRange{First: 100, Last: 104} // two slots; 104 is left over
	for slot := 0; slot < r.Slots(); slot++ {
		for _, d := range shape.Directions {
			n, err := r.Pipe(slot, d)
			if err != nil {
				t.Fatalf("Pipe(%d, %s): %v", slot, d, err)
			}
			want := 100 + 2*slot
			if d == shape.Download {
				want++
			}
			if n != want {
				t.Errorf("Pipe(%d, %s) = %d, want %d", slot, d, n, want)
			}
			if s, ok := r.Slot(n); !ok || s != slot {
				t.Errorf("Slot(%d) = %d, %v; want %d", n, s, ok, slot)
			}
			if got, ok := r.Direction(n); !ok || got != d {
				t.Errorf("Direction(%d) = %s, %v; want %s", n, got, ok, d)
			}
		}
	}
	for _, n := range []int{99, 104, 105} {
		if _, ok := r.Slot(n); ok {
			t.Errorf("Slot(%d) is ok outside the range's slots", n)
		}
		if _, ok := r.Direction(n); ok {
			t.Errorf("Direction(%d) is ok outside the range's slots", n)
		}
	}
	if _, err := r.Pipe(2, shape.Upload); err == nil {
		t.Error("Pipe(2) of a two-slot range has no error")
	}
}
