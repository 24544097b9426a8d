// SPDX-License-Identifier: Apache-2.0

package pfcheck

import (
	"context"
	"strings"
	"testing"

	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/selftest/check"
	"github.com/macake/macake/selftest/scratch"
)

// runOn runs the whole suite with an in-process emulator playing the Mac.
func runOn(t *testing.T, mac *pfdntest.Emulator) ([]check.Result, *scratch.Ledger) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	led, err := scratch.Open(dir, "pf", timeNow())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, Options{Runner: mac, Pfctl: "/sbin/pfctl", Dnctl: "/usr/sbin/dnctl", Ledger: led,
		Traffic: EmulatorTraffic(mac), NoPacketPath: "the emulator has no packet path"})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := check.Run(ctx, s.Checks(), s.Real(), s.Expected(), nil)
	done, errs := s.Close(ctx)
	if len(errs) > 0 {
		t.Fatalf("cleanup: %v (done %v)", errs, done)
	}
	return res, led
}

func TestEmulatorPassesItsOwnSelftest(t *testing.T) {
	mac := pfdntest.New()
	pristine := mac.Snapshot().String()
	res, _ := runOn(t, mac)
	for _, r := range res {
		switch {
		case r.Status == check.OK:
		case r.Status == check.Skipped && (r.ID == "lo0.shaping" || strings.HasPrefix(r.ID, "route.") || strings.HasPrefix(r.ID, "ifstat.")):
			if r.Detail == "" {
				t.Errorf("%s skipped without saying why", r.ID)
			}
		default:
			t.Errorf("%s: %s: %s", r.ID, r.Status, r.Detail)
			for _, st := range r.Steps {
				if st.RealNormalized != nil {
					t.Logf("  %s\n  real %+v\n  emu  %+v", st.Call, *st.RealNormalized, *st.ExpectedNormalized)
				}
			}
		}
	}
	if after := mac.Snapshot().String(); after != pristine {
		t.Errorf("the selftest left the Mac changed:\n%s\nwant:\n%s", after, pristine)
	}
}

// TestInjectedFaultsFailTheirChecks: a Mac that answers otherwise than the
// emulator in one respect makes exactly the checks of that fact differ
// (those that need them are skipped), everything else still matches, and
// the scratch objects are gone afterwards.
func TestInjectedFaultsFailTheirChecks(t *testing.T) {
	for _, tt := range []struct {
		name    string
		spoil   func(e *pfdntest.Emulator) error
		differs []string
		skipped []string
	}{
		{
			name: "another rounding of Mbit/s rates",
			spoil: func(e *pfdntest.Emulator) error {
				return e.AddFault(pfdntest.Fault{Match: `^dnctl pipe show`, Kind: pfdntest.Rewrite, Find: `  1\.001 Mbit/s`, Replace: "  1.000 Mbit/s"})
			},
			differs: []string{"dnctl.rounding"},
		},
		{
			name:    "the hook line missing from the main ruleset",
			spoil:   func(e *pfdntest.Emulator) error { e.DropHook(); return nil },
			differs: []string{"pfctl.hook"},
			skipped: []string{"dnctl.traffic"},
		},
		{
			name: "garbage from pipe show",
			spoil: func(e *pfdntest.Emulator) error {
				return e.AddFault(pfdntest.Fault{Match: `^dnctl pipe show`, Kind: pfdntest.Garbage})
			},
			differs: []string{"dnctl.config", "dnctl.rounding", "dnctl.replace", "dnctl.limits", "dnctl.traps", "dnctl.delete-needs-pipe"},
			// No rule is loaded to name a pipe whose listing cannot be read.
			skipped: []string{"dnctl.order", "pfctl.load", "pfctl.anchor-rules", "pfctl.anchor-listed", "pfctl.parse-error", "dnctl.traffic", "pfctl.flush"},
		},
		{
			name: "pfctl -E refused",
			spoil: func(e *pfdntest.Emulator) error {
				return e.AddFault(pfdntest.Fault{Match: `^pfctl -E$`, Kind: pfdntest.Fail, Stderr: "pfctl: DIOCSTARTREF: Operation not permitted\n"})
			},
			differs: []string{"pfctl.enable"},
			skipped: []string{"pfctl.references-token", "pfctl.release-counted", "pfctl.release-stale", "dnctl.traffic", "pfctl.release"},
		},
		{
			name:    "no ALTQ lines",
			spoil:   func(e *pfdntest.Emulator) error { e.SetALTQLines(false); return nil },
			differs: []string{"pfctl.altq"},
		},
		{
			name: "another errno text for a missing pipe",
			spoil: func(e *pfdntest.Emulator) error {
				return e.AddFault(pfdntest.Fault{Match: `^dnctl (pipe )?delete`, Kind: pfdntest.Rewrite, Stream: "stderr", Find: "Invalid argument", Replace: "No such file or directory"})
			},
			differs: []string{"dnctl.delete-needs-pipe", "dnctl.delete"},
		},
		{
			name: "rules printed without the inferred family",
			spoil: func(e *pfdntest.Emulator) error {
				return e.AddFault(pfdntest.Fault{Match: `^pfctl -a com.apple/macake-selftest -s dummynet`, Kind: pfdntest.Rewrite, Find: " inet proto", Replace: " proto"})
			},
			differs: []string{"pfctl.anchor-rules", "pfctl.parse-error"},
		},
		{
			name: "a listing not in hash order",
			spoil: func(e *pfdntest.Emulator) error {
				return e.AddFault(pfdntest.Fault{Match: `^dnctl list$`, Nth: 2, Kind: pfdntest.Rewrite, Find: `(?s)^(650\d\d: [^\n]*\n[^\n]*\n)(650\d\d: [^\n]*\n[^\n]*\n)`, Replace: "$2$1"})
			},
			differs: []string{"dnctl.order"},
		},
		{
			name: "a flush that leaves the anchor behind",
			spoil: func(e *pfdntest.Emulator) error {
				return e.AddFault(pfdntest.Fault{Match: `^pfctl -a com.apple/macake-selftest -F all`, Nth: 1, Kind: pfdntest.Fail, ExitCode: 0, Stderr: "rules cleared\nnat cleared\ndummynet cleared\n0 tables deleted.\n"})
			},
			differs: []string{"pfctl.flush"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mac := pfdntest.New()
			if err := tt.spoil(mac); err != nil {
				t.Fatal(err)
			}
			pristine := mac.Snapshot().String()
			res, _ := runOn(t, mac)
			var differs, skipped []string
			for _, r := range res {
				switch r.Status {
				case check.Differs:
					differs = append(differs, r.ID)
				case check.Skipped:
					if r.ID != "lo0.shaping" && !strings.HasPrefix(r.ID, "route.") && !strings.HasPrefix(r.ID, "ifstat.") {
						skipped = append(skipped, r.ID)
					}
				case check.Error:
					t.Errorf("%s: error: %s", r.ID, r.Detail)
				}
			}
			if strings.Join(differs, " ") != strings.Join(tt.differs, " ") {
				t.Errorf("differing checks %q, want %q", differs, tt.differs)
			}
			if strings.Join(skipped, " ") != strings.Join(tt.skipped, " ") {
				t.Errorf("skipped checks %q, want %q", skipped, tt.skipped)
			}
			mac.ClearFaults()
			if after := mac.Snapshot().String(); after != pristine {
				t.Errorf("scratch objects left behind:\n%s\nwant:\n%s", after, pristine)
			}
		})
	}
}
