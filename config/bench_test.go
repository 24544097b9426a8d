// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/macake/macake/config/tomltext"
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

// BenchmarkParseHostile measures the files that used to take time
// quadratic in their size (docs/CONFIG.md, "Size"): nesting just past the
// bound, just under the key limit, and a long one-line array whose every
// element is a problem. Each should cost about what its bytes do.
func BenchmarkParseHostile(b *testing.B) {
	var keys strings.Builder
	keys.WriteString("[match]\ninterface = \"en0\"\n[x]\n")
	for i := range tomltext.MaxKeys - 3 {
		fmt.Fprintf(&keys, "k%d = 1\n", i)
	}
	for _, bc := range []struct{ name, text string }{
		{"deep-16KB", "x = " + strings.Repeat("{a=", 5000) + "1" + strings.Repeat("}", 5000)},
		{"keys-256", keys.String()},
		{"array-64KB", "[autorate]\nreflectors = [" + strings.Repeat("1,", 32000) + "]\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.text)))
			for b.Loop() {
				Parse("hostile.toml", []byte(bc.text), LoadOptions{})
			}
		})
	}
}
