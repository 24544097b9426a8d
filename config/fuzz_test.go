// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/macake/macake/shape"
)

// FuzzParse feeds the loader arbitrary files, seeded with every example
// (good and bad): whatever the input, it returns either a link or problems
// that each carry a position, and it never panics.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"../examples/links.d/*.toml", "../examples/bad/*.toml"} {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			f.Fatalf("no seed files for %s: %v", pattern, err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("[match]\ninterface = \"en0\"\n[autorate]\nreflectors = [\"1.1.1.1\", [\"x\"], {a=1}, 5]\n"))
	f.Add([]byte("[match]\ninterface = \"en0\"\n[autorate]\nreflectors = [\"tcp:1.1.1.1:443\", \"auto:[::1]:443\", \"udp:9.9.9.9:7\", \"icmp:1.0.0.1\", \"tcp:1.1.1.1\"]\n"))
	f.Add([]byte("a.b.c = 1\n[x.y]\n[[z]]\nq = '''\n\n'''\n"))
	f.Add([]byte("[match]\ninterface = en0\n[shaper]\ndownload = 1.5 Mbit/s # x\nqueue = [\n5KB]\nupload = 5mbit\r\n[autorate\nx.y = 0x1fz\n"))
	f.Add([]byte("x = " + strings.Repeat("{a=", 40) + "1" + strings.Repeat("}", 40) + "\n"))
	f.Add([]byte("[match]\ninterface = \"en0\"\ngateway_ip = \"fe80::1%\\u001b[2J\"\n[\"\\nok: x\"]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, warnings, err := Parse("fuzz.toml", data, LoadOptions{})
		for _, w := range warnings {
			if Printable(w.Message) != w.Message {
				t.Fatalf("warning with a control character: %q", w.Message)
			}
		}
		for _, p := range Problems(err) {
			if Printable(p.Message) != p.Message {
				t.Fatalf("problem with a control character: %q", p.Message)
			}
		}
		if err == nil {
			if l.Name != "fuzz" || l.Match.Interface == "" {
				t.Fatalf("valid link without identity: %+v", l)
			}
			return
		}
		lines := strings.Count(string(data), "\n") + 1
		for _, p := range Problems(err) {
			if p.File != "fuzz.toml" || p.Message == "" || p.Line < 1 || p.Col < 1 || p.Line > lines {
				t.Fatalf("problem without a valid position: %+v (file has %d lines)", p, lines)
			}
		}
	})
}

// FuzzParseReflector: a reflector entry either fails with a message that
// quotes it or parses to an entry whose String reads back the same, with
// a port exactly when its kind has one.
func FuzzParseReflector(f *testing.F) {
	for _, s := range []string{"1.1.1.1", "icmp:1.1.1.1", "tcp:1.1.1.1:443", "udp:[2001:db8::7]:7", "auto:9.9.9.9:443", "auto:[::1]:443", "auto:9.9.9.9", "auto:", "auto:auto:1.1.1.1:1", "one.one.one.one"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseReflector(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseReflector(%q): %v does not quote the entry", s, err)
			}
			return
		}
		if !r.Addr.IsValid() || r.Kind.HasPort() != (r.Port != 0) || r.Auto && r.Kind != shape.ProbeTCP {
			t.Fatalf("ParseReflector(%q) = %+v", s, r)
		}
		back, err := ParseReflector(r.String())
		if err != nil || back != r {
			t.Fatalf("ParseReflector(%q) = %+v, whose String %q reads back as %+v, %v", s, r, r.String(), back, err)
		}
	})
}
