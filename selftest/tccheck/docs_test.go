// SPDX-License-Identifier: Apache-2.0

package tccheck

import (
	"os"
	"strings"
	"testing"
)

// TestDocsListEveryCheck: docs/LINUX.md lists every tc check with its
// reference, and nothing else.
func TestDocsListEveryCheck(t *testing.T) {
	b, err := os.ReadFile("../../docs/LINUX.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Split(l, "|"); len(f) == 5 && strings.HasPrefix(strings.TrimSpace(f[1]), "`tc.") {
			rows[strings.Trim(strings.TrimSpace(f[1]), "`")] = strings.TrimSpace(f[3])
		}
	}
	for _, c := range (&Suite{}).Checks() {
		if ref, ok := rows[c.ID]; !ok || ref != c.Ref {
			t.Errorf("docs/LINUX.md: %s has reference %q (listed %v), the check %q", c.ID, ref, ok, c.Ref)
		}
		delete(rows, c.ID)
	}
	for id := range rows {
		t.Errorf("docs/LINUX.md lists %s, which is no check", id)
	}
}
