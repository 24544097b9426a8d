// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"testing"
)

// BenchmarkParse measures decoding and validating one commented policy
// file, what watch pays per file on every reload.
func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("../examples/links.d/starlink.toml")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Parse("starlink.toml", data, LoadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad measures reading the four example policies from disk.
func BenchmarkLoad(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Load("../examples/links.d", LoadOptions{SkipOwnershipCheck: true}); err != nil {
			b.Fatal(err)
		}
	}
}
