// SPDX-License-Identifier: Apache-2.0

package pfcheck

import (
	"os"
	"testing"

	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/selftest/check"
	"github.com/macake/macake/selftest/scratch"
)

// TestDocsListEveryCheck: docs/DUMMYNET.md's table of what the selftest
// verifies has one row per check, with the check's reference, and no row
// for a check that does not exist.
func TestDocsListEveryCheck(t *testing.T) {
	b, err := os.ReadFile("../../docs/DUMMYNET.md")
	if err != nil {
		t.Fatal(err)
	}
	led, err := scratch.Open(t.TempDir(), "pf", timeNow())
	if err != nil {
		t.Fatal(err)
	}
	emu := pfdntest.New()
	s, err := New(t.Context(), Options{Runner: emu, Pfctl: "/sbin/pfctl", Dnctl: "/usr/sbin/dnctl", Ledger: led})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	for _, m := range check.DocMismatches(string(b), "docs/DUMMYNET.md §10", "", s.Checks()) {
		t.Error(m)
	}
}
