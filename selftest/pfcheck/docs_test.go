// SPDX-License-Identifier: Apache-2.0

package pfcheck

import (
	"os"
	"strings"
	"testing"

	"github.com/macake/macake/backend/pfdn/pfdntest"
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
	rows := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Split(l, "|"); len(f) == 5 && strings.HasPrefix(strings.TrimSpace(f[1]), "`") {
			id := strings.Trim(strings.TrimSpace(f[1]), "`")
			if strings.Contains(id, ".") && !strings.Contains(id, " ") {
				rows[id] = strings.TrimSpace(f[3])
			}
		}
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
	for _, c := range s.Checks() {
		ref, ok := rows[c.ID]
		switch {
		case !ok:
			t.Errorf("docs/DUMMYNET.md §10 lacks a row for %s", c.ID)
		case ref != c.Ref:
			t.Errorf("docs/DUMMYNET.md gives %s the reference %q, the check %q", c.ID, ref, c.Ref)
		}
		delete(rows, c.ID)
	}
	for id := range rows {
		t.Errorf("docs/DUMMYNET.md lists %s, which is no check", id)
	}
}
