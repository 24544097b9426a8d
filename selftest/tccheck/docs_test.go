// SPDX-License-Identifier: Apache-2.0

package tccheck

import (
	"os"
	"testing"

	"github.com/macake/macake/selftest/check"
)

// TestDocsListEveryCheck: docs/LINUX.md lists every tc check with its
// reference, and nothing else.
func TestDocsListEveryCheck(t *testing.T) {
	b, err := os.ReadFile("../../docs/LINUX.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range check.DocMismatches(string(b), "docs/LINUX.md", "tc.", (&Suite{}).Checks()) {
		t.Error(m)
	}
}
