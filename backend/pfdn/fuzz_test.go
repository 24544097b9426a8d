// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"strings"
	"testing"

	"github.com/macake/macake/backend/pfdn"
)

// The parsers read whatever pfctl and dnctl print, including garbage from
// a broken tool: they must never panic, and what they accept must be
// consistent. Seeds live in testdata/fuzz and below.

func FuzzParseRules(f *testing.F) {
	f.Add([]byte("dummynet-anchor \"com.apple/*\" all\n"), []byte(altq))
	f.Add([]byte(""), []byte(altq+"pfctl: DIOCGETRULES: Invalid argument\n"))
	f.Add([]byte("no dummynet quick on en0 inet proto icmp from any to 1.1.1.1\ndummynet out on en0 all pipe 48001\n  [ Evaluations: 0 ]\n"), []byte(""))
	f.Add([]byte("dummynet-anchor \"unterminated all\n"), []byte(""))
	f.Fuzz(func(t *testing.T, stdout, stderr []byte) {
		l, err := pfdn.ParseRules(stdout, stderr)
		if err != nil {
			return
		}
		if !l.Exists && len(l.Rules) > 0 {
			t.Fatal("rules in an anchor said to be absent")
		}
		for _, r := range l.Rules {
			if r.Text != pfdn.NormalizeRule(r.Text) || r.Text == "" {
				t.Fatalf("rule text not normalised: %q", r.Text)
			}
		}
	})
}

func FuzzParseInfo(f *testing.F) {
	f.Add([]byte("Status: Enabled for 0 days 07:05:00           Debug: Urgent\n\nState Table                          Total             Rate\n  current entries                        0               \n"), []byte(altq))
	f.Add([]byte("Status: Disabled                              Debug: Urgent\n"), []byte(""))
	f.Add([]byte("Status: Enabled for 99999999999999999999 days 00:00:00\n"), []byte(""))
	f.Fuzz(func(t *testing.T, stdout, stderr []byte) {
		info, err := pfdn.ParseInfo(stdout, stderr)
		if err == nil && !strings.Contains(string(stdout), "Status: ") {
			t.Fatalf("accepted output without a status: %+v", info)
		}
	})
}

func FuzzParseReferences(f *testing.F) {
	f.Add([]byte("TOKENS:\nPID      Process Name                 TOKEN                    TIMESTAMP\n4077     pfctl                        9084387343160548126      0 days 00:00:00\n"), []byte(altq))
	f.Add([]byte("No pf starter references held\n"), []byte(""))
	f.Fuzz(func(t *testing.T, stdout, stderr []byte) {
		refs, _, err := pfdn.ParseReferences(stdout, stderr)
		if err != nil {
			return
		}
		for _, r := range refs {
			if r.Token == "" || strings.Trim(r.Token, "0123456789") != "" {
				t.Fatalf("token %q is not a number", r.Token)
			}
		}
	})
}

func FuzzParseDummynet(f *testing.F) {
	f.Add([]byte("00001: 780.000 Kbit/s  100 ms   50 sl. 0 queues (1 buckets) droptail\n    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n"))
	f.Add([]byte("00009:   1.000 Mbit/s    0 ms   50 sl. 0 queues (64 buckets) \n\t   RED w_q 0.001999 min_th 5 max_th 15 max_p 0.099991\n"))
	f.Add([]byte("q00001: weight 10 pipe 1   50 sl.plr 1.000000 0 queues (1 buckets) droptail\n"))
	// A flow row, whose counters are the pipe's statistics.
	f.Add([]byte("00001: 780.000 Kbit/s  100 ms   50 sl. 1 queues (1 buckets) droptail\n    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n" +
		"BKT Prot ___Source IP/port____ ____Dest. IP/port____ Tot_pkt/bytes Pkt/Byte Drp\n  0 tcp    93.184.216.34/443      192.168.1.23/52144 1532  2187430  3 4380   0\n"))
	f.Fuzz(func(t *testing.T, stdout []byte) {
		d, err := pfdn.ParseDummynet(stdout)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, p := range d.Pipes {
			if seen[p.Number] {
				t.Fatalf("pipe %d twice", p.Number)
			}
			seen[p.Number] = true
		}
	})
}

func FuzzParseEnableToken(f *testing.F) {
	f.Add([]byte(altq + "pf enabled\nToken : 11012949885072952621\n"))
	f.Add([]byte("Token : \n"))
	f.Fuzz(func(t *testing.T, stderr []byte) {
		tok, err := pfdn.ParseEnableToken(stderr)
		if err == nil && (tok == "" || !strings.Contains(string(stderr), "Token : "+tok)) {
			t.Fatalf("token %q not from %q", tok, stderr)
		}
	})
}
