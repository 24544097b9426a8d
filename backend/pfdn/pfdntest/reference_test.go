// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/execrun"
)

// These tests pin the emulator's output to the reference's samples, byte
// for byte (testdata/reference), and to the single-line captures it quotes.

var epoch = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func newTestEmulator() *Emulator {
	e := New()
	e.SetClock(func() time.Time { return epoch })
	return e
}

type out struct {
	stdout, stderr string
	code           int
}

func run(t *testing.T, e *Emulator, stdin string, argv ...string) out {
	t.Helper()
	res, err := e.Run(context.Background(), execrun.Command{Argv: argv, Stdin: stdin})
	if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return out{string(res.Stdout), string(res.Stderr), res.ExitCode}
}

func mustRun(t *testing.T, e *Emulator, stdin string, argv ...string) out {
	t.Helper()
	o := run(t, e, stdin, argv...)
	if o.code != 0 {
		t.Fatalf("%v: exit %d, stderr %q", argv, o.code, o.stderr)
	}
	return o
}

func sample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "reference", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const (
	pfctlPath = "/sbin/pfctl"
	dnctlPath = "/usr/sbin/dnctl"
	altq      = "No ALTQ support in kernel\nALTQ related functions disabled\n"
	noMsk     = "    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0x0000\n"
)

func TestDnctlListMatchesReferenceSamples(t *testing.T) {
	e := newTestEmulator()
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config", "bw", "780Kbit/s", "delay", "100")
	mustRun(t, e, "", dnctlPath, "pipe", "2", "config", "bw", "330Kbit/s", "delay", "100", "queue", "20Kbytes", "plr", "0.01")
	for _, argv := range [][]string{{dnctlPath, "list"}, {dnctlPath, "show"}, {dnctlPath, "-a", "list"}, {dnctlPath, "pipe", "show"}} {
		if got, want := mustRun(t, e, "", argv...).stdout, sample(t, "dnctl-list-before-traffic.txt"); got != want {
			t.Errorf("%v:\n%s\nwant:\n%s", argv, got, want)
		}
	}
	// The flow rows of the after-traffic sample, as the kernel would hold them.
	e.with(func(m *Machine) {
		m.pipe(1).FS.Flows = []Flow{{Proto: 6, Src: netip.MustParseAddr("93.184.216.34"), SrcPort: 443,
			Dst: netip.MustParseAddr("192.168.1.23"), DstPort: 52144, TotPkts: 1532, TotBytes: 2187430, Len: 3, LenBytes: 4380}}
		m.pipe(2).FS.Flows = []Flow{{Proto: 6, Src: netip.MustParseAddr("192.168.1.23"), SrcPort: 52144,
			Dst: netip.MustParseAddr("93.184.216.34"), DstPort: 443, TotPkts: 1210, TotBytes: 98422, Drops: 14}}
	})
	if got, want := mustRun(t, e, "", dnctlPath, "list").stdout, sample(t, "dnctl-list-after-traffic.txt"); got != want {
		t.Errorf("after traffic:\n%s\nwant:\n%s", got, want)
	}
}

func TestDnctlListMatchesRealCaptures(t *testing.T) {
	e := newTestEmulator()
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config", "plr", "0.01")
	e.with(func(m *Machine) {
		m.pipe(1).FS.Flows = []Flow{{Proto: 6, Src: netip.MustParseAddr("127.0.0.1"), SrcPort: 63691,
			Dst: netip.MustParseAddr("127.0.0.1"), DstPort: 8080, TotPkts: 1011241, TotBytes: 490303519, Drops: 9463}}
	})
	if got, want := mustRun(t, e, "", dnctlPath, "list").stdout, sample(t, "dnctl-list-rust-libp2p.txt"); got != want {
		t.Errorf("rust-libp2p capture:\n%s\nwant:\n%s", got, want)
	}

	cases := []struct {
		name string
		argv []string
		flow bool
		want string
	}{
		// Network Link Conditioner (superuser.com/questions/872225).
		{"nlc", []string{"pipe", "40269", "config", "bw", "1Mbit/s", "delay", "500", "plr", "0.1"}, true,
			"40269:   1.000 Mbit/s  500 ms   50 sl.plr 0.100000 1 queues (1 buckets) droptail\n"},
		// pf-bandwidth-limit.sh guide.
		{"guide", []string{"pipe", "1", "config", "bw", "512Kbit/s"}, false,
			"00001: 512.000 Kbit/s    0 ms   50 sl. 0 queues (1 buckets) droptail\n"},
		// The reference's further line shapes (§1.7).
		{"unlimited", []string{"pipe", "3", "config"}, false, "00003: unlimited    0 ms   50 sl. 0 queues (1 buckets) droptail\n"},
		{"bits", []string{"pipe", "4", "config", "bw", "999"}, false, "00004: 999.000 bit/s     0 ms   50 sl. 0 queues (1 buckets) droptail\n"},
		{"mbit", []string{"pipe", "5", "config", "bw", "1500Kbit/s", "delay", "20", "queue", "100"}, false, "00005:   1.500 Mbit/s   20 ms  100 sl. 0 queues (1 buckets) droptail\n"},
		{"gbit", []string{"pipe", "6", "config", "bw", "1000Mbit/s", "delay", "5", "queue", "10000B"}, false, "00006: 1000.000 Mbit/s    5 ms  9 KB 0 queues (1 buckets) droptail\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEmulator()
			mustRun(t, e, "", append([]string{dnctlPath}, c.argv...)...)
			if c.flow {
				e.with(func(m *Machine) {
					m.Dummynet.Pipes[0].FS.Flows = []Flow{{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}}
				})
			}
			first, _, _ := strings.Cut(mustRun(t, e, "", dnctlPath, "list").stdout, "\n")
			if first+"\n" != c.want {
				t.Errorf("got  %q\nwant %q", first+"\n", c.want)
			}
		})
	}
}

func TestDnctlQueueLineAndMaskedPipe(t *testing.T) {
	e := newTestEmulator()
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config", "bw", "600Kbit/s", "mask", "dst-port", "0xffff")
	mustRun(t, e, "", dnctlPath, "queue", "1", "config", "weight", "10", "pipe", "1")
	for _, port := range []uint16{80, 443} {
		e.Probe(Packet{}) // pf is off: no effect, no panic
		e.with(func(m *Machine) {
			account(&m.pipe(1).FS, Packet{Proto: "tcp", Src: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), 5000), Dst: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.2"), port), Bytes: 100})
		})
	}
	got := mustRun(t, e, "", dnctlPath, "list").stdout
	// comcast#44's capture: a masked pipe with two flows and 64 buckets.
	if !strings.HasPrefix(got, "00001: 600.000 Kbit/s    0 ms   50 sl. 2 queues (64 buckets) droptail\n    mask: 0x00 0x00000000/0x0000 -> 0x00000000/0xffff\n") {
		t.Errorf("masked pipe:\n%s", got)
	}
	if !strings.Contains(got, "\nq00001: weight 10 pipe 1   50 sl. 0 queues (1 buckets) droptail\n"+noMsk) {
		t.Errorf("queue line missing:\n%s", got)
	}
}

func TestPfctlMatchesReferenceSamples(t *testing.T) {
	e := newTestEmulator()
	e.with(func(m *Machine) {
		m.PF.Enabled, m.PF.Since = true, epoch.Unix()-(7*3600+5*60)
	})
	o := mustRun(t, e, "", pfctlPath, "-s", "all")
	if want := sample(t, "pfctl-s-all-stock-head.txt"); !strings.HasPrefix(o.stdout, want) {
		t.Errorf("pfctl -s all:\n%s\nwant prefix:\n%s", o.stdout, want)
	}

	e = newTestEmulator()
	e.with(func(m *Machine) {
		m.PF.Enabled, m.PF.RefCount = true, 2
		m.PF.Tokens = []Token{
			{Value: 15053025338191571182, PID: 4063, Process: "pfctl", Created: epoch.UnixNano()},
			{Value: 9084387343160548126, PID: 4077, Process: "pfctl", Created: epoch.UnixNano()},
		}
	})
	if got, want := mustRun(t, e, "", pfctlPath, "-s", "References").stdout, sample(t, "pfctl-s-references.txt"); got != want {
		t.Errorf("pfctl -s References:\n%s\nwant:\n%s", got, want)
	}

	e = newTestEmulator()
	o = mustRun(t, e, "dummynet out on en0 all pipe 1\n", pfctlPath, "-a", "com.apple/x", "-f", "-")
	if want := sample(t, "pfctl-f-stderr.txt"); o.stderr != want || o.stdout != "" {
		t.Errorf("pfctl -f stderr:\n%q\nwant:\n%q (stdout %q)", o.stderr, want, o.stdout)
	}

	e = newTestEmulator()
	e.SetFile("killswitch.pf.conf", strings.Repeat("# comment\n", 30)+"block out all ports\n")
	o = run(t, e, "", pfctlPath, "-q", "-f", "killswitch.pf.conf")
	// -q drops the ALTQ lines but never the -f warning.
	warning := strings.TrimSuffix(sample(t, "pfctl-f-stderr.txt"), altq)
	if want := warning + sample(t, "pfctl-syntax-error.txt"); o.stderr != want || o.code != 1 {
		t.Errorf("syntax error: exit %d stderr:\n%q\nwant:\n%q", o.code, o.stderr, want)
	}

	e = newTestEmulator()
	nlc := "no dummynet quick on lo0 all\n" +
		"dummynet in quick inet all allow-opts pipe 40269\ndummynet in quick inet6 all allow-opts pipe 40269\n" +
		"dummynet out quick inet all allow-opts pipe 40270\ndummynet out quick inet6 all allow-opts pipe 40270\n"
	mustRun(t, e, nlc, pfctlPath, "-a", "com.apple.nlc/base", "-f", "-")
	if got, want := mustRun(t, e, "", pfctlPath, "-a", "com.apple.nlc/base", "-s", "dummynet").stdout, sample(t, "pfctl-nlc-rules.txt"); got != want {
		t.Errorf("NLC rules:\n%s\nwant:\n%s", got, want)
	}
}

func TestPfctlStatusLines(t *testing.T) {
	e := newTestEmulator()
	first := func() string {
		s, _, _ := strings.Cut(mustRun(t, e, "", pfctlPath, "-s", "info").stdout, "\n")
		return s
	}
	// Captured on macOS 26.5.2 (reference §3.3).
	if got := first(); got != "Status: Disabled                              Debug: Urgent" {
		t.Errorf("disabled: %q", got)
	}
	mustRun(t, e, "", pfctlPath, "-E")
	if got := first(); got != "Status: Enabled for 0 days 00:00:00           Debug: Urgent" {
		t.Errorf("enabled: %q", got)
	}
}

func TestPfctlShowsStockRulesets(t *testing.T) {
	e := newTestEmulator()
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"-sr"}, "scrub-anchor \"com.apple/*\" all fragment reassemble\nanchor \"com.apple/*\" all\n"},
		{[]string{"-sn"}, "nat-anchor \"com.apple/*\" all\nrdr-anchor \"com.apple/*\" all\n"},
		{[]string{"-s", "dummynet"}, "dummynet-anchor \"com.apple/*\" all\n"},
		{[]string{"-a", "com.apple", "-sr"}, "anchor \"200.AirDrop/*\" all\nanchor \"250.ApplicationFirewall/*\" all\n"},
		{[]string{"-s", "Anchors"}, "  com.apple\n"},
		{[]string{"-a", "com.apple", "-s", "Anchors"}, "  com.apple/250.ApplicationFirewall\n"},
		{[]string{"-s", "Ref"}, "No pf starter references held\n"},
	} {
		o := mustRun(t, e, "", append([]string{pfctlPath}, c.argv...)...)
		if o.stdout != c.want || o.stderr != altq {
			t.Errorf("pfctl %v:\nstdout %q\nwant   %q\nstderr %q", c.argv, o.stdout, c.want, o.stderr)
		}
	}
}
