// SPDX-License-Identifier: Apache-2.0

package linkfacts

import "testing"

func BenchmarkNetlinkDumpParse(b *testing.B) {
	dump := recordedDump()
	b.ReportAllocs()
	for b.Loop() {
		var d netlinkDump
		if _, err := d.add(dump, 7); err != nil {
			b.Fatal(err)
		}
		assemble(d.ifaces, d.routes, d.neigh, nil)
	}
}
