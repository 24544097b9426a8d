// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/execrun"
)

const altq = "No ALTQ support in kernel\nALTQ related functions disabled\n"

func TestParseRules(t *testing.T) {
	for _, c := range []struct {
		name           string
		stdout, stderr string
		exists         bool
		texts          []string
		anchor         string
		warnings       int
		err            string
	}{
		{name: "hook", stdout: "dummynet-anchor \"com.apple/*\" all\n", stderr: altq, exists: true,
			texts: []string{`dummynet-anchor "com.apple/*" all`}, anchor: "com.apple/*"},
		{name: "hook without ALTQ lines", stdout: "dummynet-anchor \"com.apple/*\" all\n", exists: true,
			texts: []string{`dummynet-anchor "com.apple/*" all`}, anchor: "com.apple/*"},
		{name: "absent anchor", stderr: altq + "pfctl: DIOCGETRULES: Invalid argument\n", exists: false},
		{name: "empty anchor", stderr: altq, exists: true},
		{name: "verbose counters", stdout: "dummynet out on en0 all pipe 48001\n  [ Evaluations: 3         Packets: 2         Bytes: 3000        States: 0     ]\n  [ Inserted: uid 0 pid 4077 ]\n",
			exists: true, texts: []string{"dummynet out on en0 all pipe 48001"}},
		{name: "whitespace and icmp6 normalised", stdout: "no dummynet  quick on en0 inet6 proto icmp6 from any to ::1\n", exists: true,
			texts: []string{"no dummynet quick on en0 inet6 proto ipv6-icmp from any to ::1"}},
		{name: "unknown stderr is a warning", stdout: "", stderr: "pfctl: something odd\n", exists: true, warnings: 1},
		{name: "garbage", stdout: "garbage here\n", err: "line 1: not a dummynet rule"},
		{name: "permission", stderr: "pfctl: /dev/pf: Permission denied\n", err: "unavailable"},
		{name: "contradiction", stdout: "dummynet out all pipe 1\n", stderr: "pfctl: DIOCGETRULES: Invalid argument\n", err: "also said"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := pfdn.ParseRules([]byte(c.stdout), []byte(c.stderr))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Exists != c.exists || strings.Join(l.Texts(), "|") != strings.Join(c.texts, "|") || len(l.Warnings) != c.warnings {
				t.Errorf("got %+v", l)
			}
			if c.anchor != "" && l.Rules[0].Anchor != c.anchor {
				t.Errorf("anchor %q", l.Rules[0].Anchor)
			}
		})
	}
	l, _ := pfdn.ParseRules([]byte("dummynet in on en0 all pipe 48002\n"), nil)
	if r := l.Rules[0]; r.Action != "dummynet" || r.Direction != "in" || r.Interface != "en0" || r.Pipe != 48002 {
		t.Errorf("rule fields: %+v", r)
	}
}

func TestParseInfo(t *testing.T) {
	e := pfdntest.New()
	e.SetClock(func() time.Time { return time.Unix(1_000_000, 0) })
	show := func() (execrun.Result, error) {
		return e.Run(context.Background(), execrun.Command{Argv: []string{"/sbin/pfctl", "-s", "info"}})
	}
	res, _ := show()
	info, err := pfdn.ParseInfo(res.Stdout, res.Stderr)
	if err != nil || info.Enabled || len(info.Warnings) != 0 {
		t.Fatalf("disabled: %+v %v", info, err)
	}
	e.TakeReference(1, "test")
	e.SetClock(func() time.Time { return time.Unix(1_000_000+7*3600+5*60, 0) })
	res, _ = show()
	info, err = pfdn.ParseInfo(res.Stdout, res.Stderr)
	if err != nil || !info.Enabled || info.For != 7*time.Hour+5*time.Minute || len(info.Warnings) != 0 {
		t.Fatalf("enabled: %+v %v\n%s", info, err, res.Stdout)
	}
	if _, err := pfdn.ParseInfo([]byte("hello\n"), nil); err == nil {
		t.Error("no Status line must be an error")
	}
	if info, err := pfdn.ParseInfo([]byte("Status: Disabled                              Debug: Urgent\nodd line\n"), nil); err != nil || len(info.Warnings) != 1 {
		t.Errorf("odd line: %+v %v", info, err)
	}
	if _, err := pfdn.ParseInfo(nil, []byte("pfctl: /dev/pf: Permission denied\n")); !errors.Is(err, pfdn.ErrUnavailable) {
		t.Errorf("permission: %v", err)
	}
}

func TestParseReferences(t *testing.T) {
	// The capture of reference §3.3 (macOS 26.5.2).
	sample := "TOKENS:\nPID      Process Name                 TOKEN                    TIMESTAMP\n" +
		"4077     pfctl                        9084387343160548126      0 days 00:00:00\n" +
		"4063     pfctl                        15053025338191571182     0 days 00:00:00\n"
	refs, warns, err := pfdn.ParseReferences([]byte(sample), []byte(altq))
	if err != nil || len(warns) != 0 || len(refs) != 2 || refs[0].Token != "9084387343160548126" || refs[1].PID != 4063 || refs[1].Process != "pfctl" {
		t.Fatalf("%+v %v", refs, err)
	}
	named, _, err := pfdn.ParseReferences([]byte("TOKENS:\nPID      Process Name                 TOKEN                    TIMESTAMP\n12       Network Link Cond            42                       1 days 02:03:04\n"), nil)
	if err != nil || named[0].Process != "Network Link Cond" || named[0].Age != 26*time.Hour+3*time.Minute+4*time.Second {
		t.Errorf("process name with spaces: %+v %v", named, err)
	}
	for _, none := range []struct{ stdout, stderr string }{
		{"No pf starter references held\n", altq},
		{"", "pfctl: No pf starter references held\n"},
		{"", ""},
	} {
		if refs, _, err := pfdn.ParseReferences([]byte(none.stdout), []byte(none.stderr)); err != nil || len(refs) != 0 {
			t.Errorf("%q: %+v %v", none, refs, err)
		}
	}
	if _, _, err := pfdn.ParseReferences([]byte("TOKENS:\nsomething else\n"), nil); err == nil {
		t.Error("an unknown line must be an error")
	}
	if _, warns, err := pfdn.ParseReferences([]byte("No pf starter references held\n"), []byte("pfctl: odd\n")); err != nil || len(warns) != 1 {
		t.Errorf("a stray stderr line must be a warning: %q %v", warns, err)
	}
}

func TestParseEnableToken(t *testing.T) {
	for _, c := range []struct {
		stderr, want string
	}{
		{altq + "pf enabled\nToken : 11012949885072952621\n", "11012949885072952621"},
		{"pf enabled\nToken : 7\n", "7"},
		{"pf enabled\n", ""},
		{"pf enabled\nToken : 99999999999999999999999\n", ""},
	} {
		got, err := pfdn.ParseEnableToken([]byte(c.stderr))
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("%q: %q %v", c.stderr, got, err)
		}
	}
}

func TestParseDummynetLineShapes(t *testing.T) {
	out := "" +
		"00001: 780.000 Kbit/s  100 ms   50 sl. 1 queues (1 buckets) droptail\n" +
		"    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n" +
		"   V                    0\n" +
		"BKT Prot ___Source IP/port____ ____Dest. IP/port____ Tot_pkt/bytes Pkt/Byte Drp\n" +
		"    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n" +
		"BKT Prot ___Source IP/port____ ____Dest. IP/port____ Tot_pkt/bytes Pkt/Byte Drp\n" +
		"  0 tcp    93.184.216.34/443      192.168.1.23/52144 1532  2187430  3 4380   0\n" +
		"   S                    0  F                    0\n" +
		"\n" +
		"\n        mask: proto: 0x00, flow_id: 0x00000000,  ::/0x0000 -> ::/0x0000\n" +
		"BKT ___Prot___ _flow-id_ ______________Source IPv6/port_______________ _______________Dest. IPv6/port_______________ Tot_pkt/bytes Pkt/Byte Drp\n" +
		"  0       tcp       0                                     2001:db8::1/443    2001:db8::2/52144  10      100  0    0   0\n" +
		"\x00\x01garbled flow row\n" +
		"00002: 330.000 Kbit/s  100 ms  20 KBplr 0.010000 0 queues (1 buckets) droptail\n" +
		"    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n" +
		"00004: 999.000 bit/s     0 ms  1500 B 0 queues (1 buckets) droptail\n" +
		"    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n" +
		"00009:   1.000 Mbit/s    0 ms   50 sl. 0 queues (64 buckets) \n" +
		"\t  GRED w_q 0.001999 min_th 5 max_th 15 max_p 0.099991\n" +
		"    mask: 0x06 0xffffffff/0x0000 -> 0x00000000/0xffff\n" +
		"00010: unlimited    0 ms   50 sl. 0 queues (1 buckets) droptail\n" +
		"    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n" +
		"00011: en0    0 ms   50 sl. 0 queues (1 buckets) droptail\n" +
		"    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n" +
		"48001: 2147.483 Mbit/s    0 ms  1024 KB 0 queues (1 buckets) droptail\n" +
		"    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n" +
		"q00001: weight 10 pipe 1   50 sl. 0 queues (1 buckets) droptail\n" +
		"    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n"
	d, err := pfdn.ParseDummynet([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]pfdn.PipeConfig{
		1:     {BandwidthBits: 780000, DelayMS: 100, QueueSlots: 50},
		2:     {BandwidthBits: 330000, DelayMS: 100, QueueBytes: 20 * 1024, PLR: "0.010000"},
		4:     {BandwidthBits: 999, QueueBytes: 1500},
		9:     {BandwidthBits: 1000000, QueueSlots: 50, RED: "GRED w_q 0.001999 min_th 5 max_th 15 max_p 0.099991", Mask: "proto 0x06 src 0xffffffff/0x0000 dst 0x00000000/0xffff"},
		10:    {QueueSlots: 50},
		11:    {ClockInterface: "en0", QueueSlots: 50},
		48001: {BandwidthBits: 2147483000, QueueBytes: 1024 * 1024},
	}
	if len(d.Pipes) != len(want) {
		t.Fatalf("%d pipes: %+v", len(d.Pipes), d.Pipes)
	}
	for _, p := range d.Pipes {
		if p.Config != want[p.Number] {
			t.Errorf("pipe %d: %+v, want %+v", p.Number, p.Config, want[p.Number])
		}
	}
	if p, _ := d.Pipe(1); p.Flows != 1 || p.Buckets != 1 {
		t.Errorf("pipe 1 flows %d buckets %d", p.Flows, p.Buckets)
	}
	// Both flow rows of pipe 1 (IPv4 and IPv6) add up; the garbled one
	// counts nothing.
	if p, _ := d.Pipe(1); p.Counters != (pfdn.FlowCounters{TotPackets: 1542, TotBytes: 2187530, Packets: 3, Bytes: 4380}) {
		t.Errorf("pipe 1 counters %+v", p.Counters)
	}
	if p, _ := d.Pipe(2); p.Counters != (pfdn.FlowCounters{}) {
		t.Errorf("pipe 2 has no flows, counters %+v", p.Counters)
	}
	if len(d.Queues) != 1 || d.Queues[0].Parent != 1 || d.Queues[0].Weight != 10 {
		t.Errorf("queues: %+v", d.Queues)
	}
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "garbled") {
		t.Errorf("warnings: %q", d.Warnings)
	}
	for _, bad := range []string{
		"hello\n",
		"00001: 1.000 Mbit/s    0 ms   50 sl. 0 queues (1 buckets) droptail\nnot a mask\n",
		"    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n",
		"00001: 1.000 Mbit/s    0 ms   50 sl. 0 queues (1 buckets) \n",
		"00001: 1.000 Mbit/s    0 ms   50 sl. 0 queues (1 buckets) droptail\n00001: 1.000 Mbit/s    0 ms   50 sl. 0 queues (1 buckets) droptail\n",
		"00001: 1.5 Gbit/s    0 ms   50 sl. 0 queues (1 buckets) droptail\n",
	} {
		if _, err := pfdn.ParseDummynet([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if d, err := pfdn.ParseDummynet(nil); err != nil || len(d.Pipes) != 0 {
		t.Errorf("empty listing: %+v %v", d, err)
	}
}

// TestParseDummynetRoundTrip configures random pipes on the emulated Mac
// the way macake does and checks the parsed listing equals the quantised
// configuration: whatever macake sends, it reads back exactly.
func TestParseDummynetRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	e := pfdntest.New()
	want := map[int]pfdn.PipeConfig{}
	for i := 0; i < 300; i++ {
		n := 1 + rng.IntN(65535)
		p := randomPipe(rng)
		cmd := pfdn.PipeCommand("/usr/sbin/dnctl", n, p)
		res, err := e.Run(context.Background(), cmd)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v %s", cmd.Argv, err, res.Stderr)
		}
		want[n] = pfdn.Quantize(p).Config()
	}
	res, _ := e.Run(context.Background(), execrun.Command{Argv: []string{"/usr/sbin/dnctl", "list"}})
	d, err := pfdn.ParseDummynet(res.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Pipes) != len(want) {
		t.Fatalf("%d pipes, want %d", len(d.Pipes), len(want))
	}
	for _, p := range d.Pipes {
		if p.Config != want[p.Number] {
			t.Errorf("pipe %d read back as %+v, sent %+v", p.Number, p.Config, want[p.Number])
		}
	}
}

func TestPipeCommandNeverUsesTrapSyntax(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1000; i++ {
		argv := pfdn.PipeCommand("dnctl", 48001, randomPipe(rng)).Argv
		bw, q := argv[5], argv[7]
		if argv[4] != "bw" || argv[6] != "queue" || len(argv) != 8 {
			t.Fatalf("argv %v", argv)
		}
		for _, v := range []struct{ s, unit string }{{bw, "Kbit/s"}, {q, "Kbytes"}} {
			num, ok := strings.CutSuffix(v.s, v.unit)
			n, err := strconv.Atoi(num)
			if !ok || err != nil || strings.HasPrefix(num, "0") || n < 1 {
				t.Fatalf("%q is not a plain decimal integer with %s", v.s, v.unit)
			}
		}
	}
}
