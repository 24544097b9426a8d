// SPDX-License-Identifier: Apache-2.0

package history

import (
	"testing"
	"time"

	"github.com/macake/macake/daemon/statusapi"
)

// TestLinks: a link's samples come back oldest first, only the last
// Window of them, after since; a link without a sample for a whole Window
// is forgotten.
func TestLinks(t *testing.T) {
	start := time.Unix(10_000, 0)
	var h Links
	n := historyLen + 5
	for i := range n {
		now := start.Add(time.Duration(i) * Step)
		h.Add(now, map[string]statusapi.HistorySample{"home": {At: now, RTT: statusapi.Value(i)}})
	}
	got := h.Get("home", time.Time{})
	if len(got) != historyLen || got[0].RTT != 5 || got[len(got)-1].RTT != statusapi.Value(n-1) {
		t.Fatalf("%d samples from %v to %v; want %d from 5 to %d", len(got), got[0].RTT, got[len(got)-1].RTT, historyLen, n-1)
	}
	last := start.Add(time.Duration(n-1) * Step)
	if got := h.Get("home", last.Add(-3*Step)); len(got) != 3 {
		t.Errorf("%d samples after since, want 3", len(got))
	}
	h.Add(last.Add(Window+Step), map[string]statusapi.HistorySample{"work": {At: last.Add(Window + Step)}})
	if got := h.Get("home", time.Time{}); got != nil {
		t.Errorf("home kept %d samples a whole window after its last", len(got))
	}
}
