// SPDX-License-Identifier: Apache-2.0

package pfcheck

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/selftest/scratch"
)

// TestRemoveScratchReleasesOnlyItsOwnReferences: a recorded token is
// released when the reference holding it was taken during that selftest,
// and left alone when it was taken later, by a holder whose token has the
// same number (tokens are hashes of reused kernel addresses).
func TestRemoveScratchReleasesOnlyItsOwnReferences(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	now := start
	mac := pfdntest.New()
	mac.SetClock(func() time.Time { return now })
	now = start.Add(3 * time.Second)
	ours := strconv.FormatUint(mac.TakeReference(4001, "pfctl"), 10)
	now = start.Add(48 * time.Hour)
	daemons := strconv.FormatUint(mac.TakeReference(4100, "pfctl"), 10)
	now = now.Add(time.Hour)

	rec := scratch.Record{PID: 4000, Started: start, Backend: "pf", Tokens: []string{ours, daemons}}
	done, errs := RemoveScratch(context.Background(), mac, "/sbin/pfctl", "/usr/sbin/dnctl", rec, now)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if !slices.Equal(done, []string{"released pf reference " + ours}) {
		t.Errorf("done %q, want only the selftest's own reference released", done)
	}
	if snap := mac.Snapshot(); !slices.Equal(snap.References, []string{"4100 pfctl"}) || !snap.PFEnabled {
		t.Errorf("the later holder's reference must stay: %+v", snap.References)
	}
}
