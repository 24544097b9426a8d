// SPDX-License-Identifier: Apache-2.0

package statusapi

import (
	"encoding/json"
	"testing"
)

func TestSparkline(t *testing.T) {
	m := Missing
	for _, c := range []struct {
		name   string
		values []Value
		width  int
		peak   bool
		top    float64
		want   string
	}{
		{"one mark per value, from 0 to the top", []Value{0, 1, 2, 3, 4, 5, 6, 7}, 60, false, 7, "▁▂▃▄▅▆▇█"},
		{"nothing measured is blank", []Value{m, 7, m, 0}, 60, false, 0, " █ ▁"},
		{"means of two", []Value{0, 8, 8, 8, 4, m}, 3, false, 8, "▅█▅"},
		{"peaks of two keep a spike", []Value{0, 8, 1, 1, 1, 1}, 3, true, 0, "█▂▂"},
		{"a flat zero line", []Value{0, 0, 0}, 60, false, 0, "▁▁▁"},
		{"nothing at all", nil, 60, false, 0, ""},
	} {
		if got := Sparkline(bucket(c.values, c.width, c.peak), c.top); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestHistoryJSON: a value nothing measured is null, and reads back as
// missing.
func TestHistoryJSON(t *testing.T) {
	b, err := json.Marshal([]Value{1.5, Missing, 8e7})
	if err != nil || string(b) != "[1.5,null,80000000]" {
		t.Fatalf("%s %v", b, err)
	}
	var back []Value
	if err := json.Unmarshal(b, &back); err != nil || back[0] != 1.5 || !back[1].IsMissing() || back[2] != 8e7 {
		t.Errorf("%v %v", back, err)
	}
}
