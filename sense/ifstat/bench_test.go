// SPDX-License-Identifier: Apache-2.0

package ifstat

import (
	"bytes"
	"os"
	"testing"
)

func BenchmarkParseIfAllData(b *testing.B) {
	// A Mac lists 20 to 40 interfaces; 32 records.
	var buf bytes.Buffer
	for range 32 {
		buf.Write(ifmib("en0", en0))
	}
	data := buf.Bytes()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseIfAllData(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSysfsRead reads the loopback's four counters, the Linux cost of
// one load sample.
func BenchmarkSysfsRead(b *testing.B) {
	if _, err := os.Stat("/sys/class/net/lo/statistics/rx_bytes"); err != nil {
		b.Skip("no sysfs")
	}
	r := NewSysfsReader("/sys/class/net")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Read("lo"); err != nil {
			b.Fatal(err)
		}
	}
}
