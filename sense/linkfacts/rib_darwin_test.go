// SPDX-License-Identifier: Apache-2.0

package linkfacts

import "testing"

// TestParseRIBAgreesWithXNetRoute checks parseRIB against x/net/route on
// this Mac's live dumps (CI runs Linux, so this runs only on a Mac; the
// Linux tests use bytes built from the documented layouts). `macake
// selftest` runs the same comparison.
func TestParseRIBAgreesWithXNetRoute(t *testing.T) {
	c, err := CompareWithXNetRoute()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Disagreements {
		t.Error(p)
	}
	for _, u := range c.Uncompared {
		t.Log(u)
	}
	if c.Messages == 0 && len(c.Uncompared) == 0 {
		t.Error("no route messages compared")
	}
}
