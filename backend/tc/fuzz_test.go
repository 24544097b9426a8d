// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"os"
	"strings"
	"testing"

	"github.com/macake/macake/internal/golden"
)

// seedFromRecordings adds every recorded output whose command contains
// kind ("qdisc show", ...) to the fuzz corpus, plus the given extras.
func seedFromRecordings(f *testing.F, kind string, extra ...string) {
	for _, file := range golden.Glob(f, "testdata/diff/*/live.txtar") {
		rec := readRecording(f, file)
		for cmd, out := range rec.outputs {
			if strings.Contains(cmd, kind) {
				f.Add([]byte(out))
			}
		}
	}
	for _, e := range extra {
		f.Add([]byte(e))
	}
}

func FuzzParseQdiscs(f *testing.F) {
	seedFromRecordings(f, "qdisc show",
		`[{"kind":"cake","handle":"8007:","root":true,"options":{"bandwidth":"unlimited","overhead":-8}}]`,
		`[{"kind":"htb","handle":"4d4b:","options":{"default":"0xffffffffff"}}]`)
	// tc -s -j: the counters macake reads as the shaper's statistics (and
	// CAKE's tins).
	for _, name := range []string{"qdisc-show-s-j.json", "cake-qdisc-show-s-j.json"} {
		b, err := os.ReadFile("testdata/stats/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		qs, err := ParseQdiscs(data)
		if err != nil && qs != nil {
			t.Errorf("an error came with qdiscs")
		}
	})
}

func FuzzParseClasses(f *testing.F) {
	seedFromRecordings(f, "class show",
		"class htb 4d4b:1 root leaf 4d4c: prio 0 rate 99999999999Tbit ceil 1bit mpu 1Mb\n",
		`[{"class":"htb","handle":"4d4b:1","rate":"20Mbit","ceil":18446744073709551615}]`)
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := ParseClasses(data)
		for _, c := range cs {
			if err == nil && (c.RateBits < 0 || c.CeilBits < 0) {
				t.Errorf("negative rate parsed: %+v", c)
			}
		}
	})
}

func FuzzParseFilters(f *testing.F) {
	seedFromRecordings(f, "filter show",
		`[{"pref":1,"kind":"u32","options":{"match":{"value":"zz","mask":"1"},"actions":[{"kind":"mirred"}]}}]`)
	f.Fuzz(func(t *testing.T, data []byte) {
		fs, err := ParseFilters(data)
		if err != nil {
			return
		}
		for _, flt := range fs {
			// Whatever parsed must be safe for the ownership tests.
			isOurRedirect(flt)
			isOurExemption(flt, ingressHook, false)
			isOurExemption(flt, egressHook, false)
			isOurExemption(flt, egressHook, true)
		}
	})
}

func FuzzParseLinks(f *testing.F) {
	seedFromRecordings(f, "link show", `[{"ifname":"eth0","ifindex":"2"}]`, `[[]]`)
	f.Fuzz(func(t *testing.T, data []byte) {
		ds, err := ParseLinks(data)
		for _, d := range ds {
			if err == nil && d.Name == "" {
				t.Errorf("a device without a name parsed: %+v", d)
			}
		}
	})
}

func FuzzParseKernelConfig(f *testing.F) {
	f.Add("CONFIG_NET_SCH_CAKE=m\n# CONFIG_IFB is not set\n")
	f.Add("CONFIG_=\n=y\nCONFIG_X")
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := ParseKernelConfig(strings.NewReader(s))
		if err == nil {
			CapabilitiesFromConfig(cfg).Report()
		}
	})
}
