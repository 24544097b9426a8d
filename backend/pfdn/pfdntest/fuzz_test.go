// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/macake/macake/execrun"
)

// FuzzPfConf feeds arbitrary rule files to pfctl's emulated parser: it must
// never panic, and a file it accepts must print rules it accepts again.
func FuzzPfConf(f *testing.F) {
	for _, s := range []string{
		"dummynet out on en0 all pipe 1\n",
		"no dummynet quick on en0 proto icmp from any to { 1.1.1.1, 2606:4700::1111 }\n",
		"m = \"en0\"\ndummynet in on $m proto { tcp udp } from 10.0.0.0/8 port 1000:2000 to ! 192.168.1.1 port >< 5 pipe 2\n",
		"scrub-anchor \"com.apple/*\"\nnat-anchor \"com.apple/*\"\nload anchor \"com.apple\" from \"/etc/pf.anchors/com.apple\"\n",
		"pass in quick on en0 inet proto tcp from any to any port { 22 443 } flags S/SA keep state (max 10, source-track rule)\n",
		"nat on en0 from 10.0.0.0/8 to any -> (en0)\n",
		"dummynet out all label \"x\" pipe 65535 \\\n probability 50%\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		parsed, errs := parseConf(text, true)
		if len(errs) > 0 {
			return
		}
		var b strings.Builder
		for _, r := range parsed.rules {
			if r.isAnchorRule() || r.Redirect != "" || r.State != "" || r.Label != "" {
				continue // printed forms the subset does not promise to re-read
			}
			b.WriteString(r.String() + "\n")
		}
		if _, errs := parseConf(b.String(), true); len(errs) > 0 && utf8.ValidString(text) {
			t.Errorf("printed rules do not parse again: %q -> %q: %v", text, b.String(), errs)
		}
	})
}

// FuzzCommands runs arbitrary pfctl and dnctl command lines: the emulator
// must never panic and must always answer with an exit code.
func FuzzCommands(f *testing.F) {
	for _, s := range []string{
		"dnctl pipe 1 config bw 1.5Mbit/s queue 10Kbytes plr 0.1 mask all red 0.002/5/15/0.1",
		"dnctl queue 1 config pipe 1 weight 0",
		"dnctl 1 pipe delete",
		"dnctl -vq list 1",
		"pfctl -a com.apple/macake -s dummynet",
		"pfctl -E -X 0x10 -d -s References",
		"pfctl -vvs Anchors -a com.apple",
		"pfctl -F all -a _x",
	} {
		f.Add(s, "dummynet out on en0 all pipe 1\n")
	}
	f.Fuzz(func(t *testing.T, line, stdin string) {
		argv := strings.Fields(line)
		if len(argv) == 0 {
			return
		}
		e := New()
		e.SetReadFile(func(string) ([]byte, error) { return []byte(stdin), nil })
		for i := 0; i < 2; i++ {
			res, err := e.Run(context.Background(), execrun.Command{Argv: argv, Stdin: stdin})
			if err == nil && res.ExitCode < 0 {
				t.Fatalf("%q: negative exit %d without an error", line, res.ExitCode)
			}
		}
		e.Snapshot()
		e.Run(context.Background(), execrun.Command{Argv: []string{"dnctl", "list"}})
	})
}
