// SPDX-License-Identifier: Apache-2.0

package pfcheck

import (
	"strings"
	"testing"
)

// FuzzPipeSections: whatever a Mac's dnctl prints, the scratch pipes'
// sections are pieces of it, in order, and a listing of nothing but
// wanted pipes is kept whole.
func FuzzPipeSections(f *testing.F) {
	f.Add("65000:   1.001 Mbit/s    0 ms   50 KB 0 queues (1 buckets) droptail\n    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n65001: 800.000 Kbit/s    0 ms   50 sl. 0 queues (1 buckets) droptail\n")
	f.Add("q65000: weight 1 pipe 1\n48001:  20.000 Mbit/s\n65000: x\n")
	f.Add("65000: a\n\n65000: b")
	f.Fuzz(func(t *testing.T, listing string) {
		want := map[int]bool{65000: true, 65001: true}
		got := pipeSections(listing, want)
		rest := listing
		for _, sec := range got {
			i := strings.Index(rest, sec)
			if i < 0 || sec == "" {
				t.Fatalf("section %q is not the next piece of the listing", sec)
			}
			rest = rest[i+len(sec):]
		}
		if all := strings.Join(got, ""); strings.HasPrefix(listing, "65000: ") && !queueLineRE.MatchString(listing) &&
			!strings.ContainsAny(strings.TrimPrefix(listing, "65000: "), "\n") && all != listing {
			t.Fatalf("a one-line listing of a wanted pipe became %q", all)
		}
	})
}
