// SPDX-License-Identifier: Apache-2.0

package pfcheck

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/execrun"
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

// TestRefusesAnotherSelftestsAnchor: rules in the scratch anchor that
// this run's record does not name are another selftest's: New refuses,
// records nothing, and the rules stay.
func TestRefusesAnotherSelftestsAnchor(t *testing.T) {
	mac := pfdntest.New()
	rule := "dummynet out on lo0 proto tcp from 127.0.0.1 to 127.0.0.1 port 9 pipe 65000\n"
	if _, err := mac.Run(context.Background(), execrun.Command{Argv: []string{"/usr/sbin/dnctl", "pipe", "65000", "config", "bw", "1000Kbit/s"}}); err != nil {
		t.Fatal(err)
	}
	if res, err := mac.Run(context.Background(), execrun.Command{Argv: []string{"/sbin/pfctl", "-a", ScratchAnchor, "-f", "-"}, Stdin: rule}); err != nil || res.ExitCode != 0 {
		t.Fatalf("loading the other selftest's rule: %v %s", err, res.Stderr)
	}
	before := mac.Snapshot().String()
	led, err := scratch.Open(t.TempDir(), "pf", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), Options{Runner: mac, Pfctl: "/sbin/pfctl", Dnctl: "/usr/sbin/dnctl", Ledger: led})
	if err == nil {
		s.Close(context.Background())
		t.Fatal("New must refuse a scratch anchor with rules in it")
	}
	if !strings.Contains(err.Error(), "another macake selftest is running") {
		t.Errorf("error %v", err)
	}
	if rec := led.Record(); !rec.Empty() {
		t.Errorf("the record names %+v", rec)
	}
	if after := mac.Snapshot().String(); after != before {
		t.Errorf("the other selftest's objects changed:\n%s\nwant:\n%s", after, before)
	}
}
