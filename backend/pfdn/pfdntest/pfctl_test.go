// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var tokenRE = regexp.MustCompile(`^` + altq + `pf enabled\nToken : (\d+)\n$`)

func enableRef(t *testing.T, e *Emulator) string {
	t.Helper()
	o := mustRun(t, e, "", pfctlPath, "-E")
	m := tokenRE.FindStringSubmatch(o.stderr)
	if m == nil || o.stdout != "" {
		t.Fatalf("pfctl -E: %+v", o)
	}
	return m[1]
}

func TestPfctlReferenceTokens(t *testing.T) {
	// reference §3.2's exit-status table.
	e := newTestEmulator()
	if o := run(t, e, "", pfctlPath, "-d"); o.code != 1 || o.stderr != altq+"pfctl: pf not enabled\n" {
		t.Errorf("-d when off: %+v", o)
	}
	if o := run(t, e, "", pfctlPath, "-X", "12345"); o.code != 1 || o.stderr != altq+"pfctl: pf not enabled\n" {
		t.Errorf("-X stale when off: %+v", o)
	}
	a := enableRef(t, e)
	b := enableRef(t, e)
	if a == b {
		t.Fatal("tokens must be unique")
	}
	if o := run(t, e, "", pfctlPath, "-X", "12345"); o.code != 1 || o.stderr != altq+"pfctl: pf: token invalid\n" {
		t.Errorf("-X stale when on: %+v", o)
	}
	if o := run(t, e, "", pfctlPath, "-e"); o.code != 1 || o.stderr != altq+"pfctl: pf already enabled\n" {
		t.Errorf("-e when on: %+v", o)
	}
	// The failing -e still took a reference (tokens == count held).
	if e.Snapshot().RefCount != 3 {
		t.Errorf("refcount after failing -e = %d, want 3", e.Snapshot().RefCount)
	}
	if o := run(t, e, "", pfctlPath, "-X", a); o.code != 0 || o.stderr != altq+"disable request successful. 2 more pf enable reference(s) remaining, pf still enabled.\n" {
		t.Errorf("-X with others left: %+v", o)
	}
	refs := mustRun(t, e, "", pfctlPath, "-s", "References").stdout
	if strings.Contains(refs, a) || !strings.Contains(refs, b) {
		t.Errorf("References after -X %s:\n%s", a, refs)
	}
	mustRun(t, e, "", pfctlPath, "-X", b)
	if s := e.Snapshot(); !s.PFEnabled || s.RefCount != 1 {
		t.Errorf("the -e reference should keep pf on: %+v", s)
	}
	// -d kills every reference.
	c := enableRef(t, e)
	if o := run(t, e, "", pfctlPath, "-d"); o.code != 0 || o.stderr != altq+"pf disabled\n" {
		t.Errorf("-d: %+v", o)
	}
	if o := run(t, e, "", pfctlPath, "-X", c); o.code != 1 || o.stderr != altq+"pfctl: pf not enabled\n" {
		t.Errorf("-X after -d: %+v", o)
	}
	if got := mustRun(t, e, "", pfctlPath, "-s", "References").stdout; got != "No pf starter references held\n" {
		t.Errorf("References after -d: %q", got)
	}
	d := enableRef(t, e)
	if o := run(t, e, "", pfctlPath, "-X", d); o.code != 0 || o.stderr != altq+"pf disabled\n" {
		t.Errorf("-X of the last reference: %+v", o)
	}
	if o := run(t, e, "", pfctlPath, "-X", "nonsense"); o.code != 1 || o.stderr != "pfctl: Invalid token value 'nonsense'\n"+pfctlUsage {
		t.Errorf("-X nonsense: %+v", o)
	}
	if o := run(t, e, "", pfctlPath, "-q", "-E"); o.code != 0 || o.stderr != "" {
		t.Errorf("-q -E: %+v", o)
	}
}

func TestPfctlALTQLinesAreSwitchable(t *testing.T) {
	e := newTestEmulator()
	e.SetALTQLines(false)
	if o := mustRun(t, e, "", pfctlPath, "-E"); !strings.HasPrefix(o.stderr, "pf enabled\nToken : ") {
		t.Errorf("without ALTQ lines: %q", o.stderr)
	}
	e.SetALTQLines(true)
	if o := mustRun(t, e, "", pfctlPath, "-s", "info"); o.stderr != altq {
		t.Errorf("with ALTQ lines: %q", o.stderr)
	}
	if o := mustRun(t, e, "", pfctlPath, "-n", "-f", "-"); o.stderr != "pfctl: "+loadWarning+"\n" {
		t.Errorf("-n prints the -f warning but no ALTQ lines: %q", o.stderr)
	}
}

func TestPfctlAnchorLifecycle(t *testing.T) {
	e := newTestEmulator()
	if o := mustRun(t, e, "", pfctlPath, "-a", "com.apple/macake", "-s", "dummynet"); o.stdout != "" || o.stderr != altq+"pfctl: DIOCGETRULES: Invalid argument\n" {
		t.Errorf("missing anchor: %+v", o)
	}
	if o := mustRun(t, e, "", pfctlPath, "-a", "com.apple/macake", "-s", "Anchors"); o.stderr != altq+"Anchor 'com.apple/macake' not found.\n" {
		t.Errorf("missing anchor -s Anchors: %+v", o)
	}
	mustRun(t, e, "dummynet out on en0 all pipe 1\npass out all\n", pfctlPath, "-a", "com.apple/macake", "-f", "-")
	if got := mustRun(t, e, "", pfctlPath, "-a", "com.apple", "-s", "Anchors").stdout; got != "  com.apple/250.ApplicationFirewall\n  com.apple/macake\n" {
		t.Errorf("anchors: %q", got)
	}
	// A load replaces every rule type: the filter rule is gone too.
	mustRun(t, e, "dummynet in on en0 all pipe 2\n", pfctlPath, "-a", "com.apple/macake", "-f", "-")
	if got := mustRun(t, e, "", pfctlPath, "-a", "com.apple/macake", "-s", "rules").stdout; got != "" {
		t.Errorf("filter rules survived a dummynet-only load: %q", got)
	}
	// Emptied, it is deleted.
	o := mustRun(t, e, "", pfctlPath, "-a", "com.apple/macake", "-F", "all")
	if o.stderr != altq+"rules cleared\nnat cleared\ndummynet cleared\n0 tables deleted.\n" {
		t.Errorf("-F all with -a: %q", o.stderr)
	}
	if got := mustRun(t, e, "", pfctlPath, "-a", "com.apple", "-s", "Anchors").stdout; got != "  com.apple/250.ApplicationFirewall\n" {
		t.Errorf("the emptied anchor should vanish: %q", got)
	}
	// Flushing a missing anchor still succeeds; loading nothing deletes too.
	mustRun(t, e, "", pfctlPath, "-a", "com.apple/nothing", "-F", "all")
	mustRun(t, e, "dummynet out on en0 all pipe 1\n", pfctlPath, "-a", "com.apple/x", "-f", "-")
	mustRun(t, e, "", pfctlPath, "-a", "com.apple/x", "-f", "-")
	if _, ok := e.Snapshot().Rulesets["com.apple/x"]; ok {
		t.Error("an anchor loaded empty should vanish")
	}
	if o := run(t, e, "", pfctlPath, "-a", "_private", "-F", "all"); o.code != 1 || !strings.HasSuffix(o.stderr, "pfctl: anchor names beginning with '_' cannot be modified from the command line\n") {
		t.Errorf("_ anchor: %+v", o)
	}
}

func TestPfctlDummynetGrammar(t *testing.T) {
	// reference §3.4 and §3.7.
	for _, c := range []struct{ in, out string }{
		{"dummynet out on en0 all pipe 1", "dummynet out on en0 all pipe 1"},
		{"dummynet in quick on en0 proto tcp from any to any port 443 pipe 2", "dummynet in quick on en0 proto tcp from any to any port = 443 pipe 2"},
		{"dummynet in inet from any to ! 127.0.0.1 pipe 1", "dummynet in inet from any to ! 127.0.0.1 pipe 1"},
		{"dummynet out from any to 127.0.0.1 pipe 1", "dummynet out inet from any to 127.0.0.1 pipe 1"},
		{"dummynet out proto { tcp udp } to any port 80 pipe 1", "dummynet out proto tcp from any to any port = 80 pipe 1\ndummynet out proto udp from any to any port = 80 pipe 1"},
		{"no dummynet quick on en0 proto icmp from any to { 1.1.1.1 8.8.8.8 }", "no dummynet quick on en0 inet proto icmp from any to 1.1.1.1\nno dummynet quick on en0 inet proto icmp from any to 8.8.8.8"},
		{"no dummynet quick on en0 proto icmp6 from 2606:4700:4700::1111 to any", "no dummynet quick on en0 inet6 proto ipv6-icmp from 2606:4700:4700::1111 to any"},
		{"m = \"en0\"\ndummynet out on $m all pipe 3", "dummynet out on en0 all pipe 3"},
		{"dummynet out on en0 all label \"x\" pipe 4", "dummynet out on en0 all label \"x\""},
	} {
		e := newTestEmulator()
		o := run(t, e, c.in+"\n", pfctlPath, "-a", "t", "-f", "-")
		if o.code != 0 {
			t.Errorf("%q: %+v", c.in, o)
			continue
		}
		if got := mustRun(t, e, "", pfctlPath, "-a", "t", "-s", "dummynet").stdout; got != c.out+"\n" {
			t.Errorf("%q printed as\n%s\nwant\n%s", c.in, got, c.out)
		}
	}
	for _, c := range []struct{ in, msg string }{
		{"dummynet all pipe 1", "a dummynet rule cannot be specified without direction"},
		{"dummynet out all pipe 0", "a dummynet rule needs a pipe number between 1 and 65535"},
		{"dummynet out all pipe 65536", "a dummynet rule needs a pipe number between 1 and 65535"},
		{"dummynet out all", "a dummynet rule needs a pipe number between 1 and 65535"},
		{"no dummynet out all pipe 1", "specifying a pipe with no dummynet doesn't make sense"},
		{"dummynet out all keep state pipe 1", "keep state on dummynet rules is not allowed"},
		{"dummynet out all queue std", "Cannot specify an altq queue with a dummynet rule"},
		{"dummynet out proto icmp from any port 80 to any pipe 1", "port only applies to tcp/udp"},
		{"dummynet out from example.com to any pipe 1", "no IP address found for example.com"},
		{"dummynet out on $nope all pipe 1", "macro 'nope' not defined"},
		{"dummynet sideways all pipe 1", "syntax error"},
		{"pass out all\nscrub in all", "Rules must be in order: options, normalization, queueing, translation, filtering"},
	} {
		e := newTestEmulator()
		before := e.Snapshot().String()
		o := run(t, e, c.in+"\n", pfctlPath, "-a", "t", "-f", "-")
		line := strings.Count(c.in, "\n") + 1
		want := "pfctl: " + loadWarning + "\n" + altq + "stdin:" + strconv.Itoa(line) + ": " + c.msg + "\npfctl: Syntax error in config file: pf rules not loaded\n"
		if o.code != 1 || o.stderr != want {
			t.Errorf("%q: exit %d stderr\n%s\nwant\n%s", c.in, o.code, o.stderr, want)
		}
		if e.Snapshot().String() != before {
			t.Errorf("%q: a failed load changed state", c.in)
		}
		// -n prints only the per-line errors.
		o = run(t, e, c.in+"\n", pfctlPath, "-n", "-a", "t", "-f", "-")
		if o.code != 1 || strings.Contains(o.stderr, "pf rules not loaded") {
			t.Errorf("-n %q: %+v", c.in, o)
		}
	}
}

func TestPfctlNoActionAndVerboseLoad(t *testing.T) {
	e := newTestEmulator()
	before := e.Snapshot().String()
	o := mustRun(t, e, "dummynet out on en0 all pipe 1\nunused = \"x\"\n", pfctlPath, "-nvf", "-")
	if o.stdout != "dummynet out on en0 all pipe 1\n" || !strings.HasSuffix(o.stderr, "warning: macro 'unused' not used\n") {
		t.Errorf("-nvf: %+v", o)
	}
	if e.Snapshot().String() != before {
		t.Error("-n changed state")
	}
}

func TestPfctlMainRulesetReloadUnhooksAndRehooks(t *testing.T) {
	e := newTestEmulator()
	// A tool like throttle loads its own main ruleset: the hook is gone.
	mustRun(t, e, "dummynet in inet from any to ! 127.0.0.1 pipe 1\n", pfctlPath, "-f", "-")
	if got := mustRun(t, e, "", pfctlPath, "-s", "dummynet").stdout; got != "dummynet in inet from any to ! 127.0.0.1 pipe 1\n" {
		t.Errorf("main dummynet after foreign load: %q", got)
	}
	// `pfctl -f /etc/pf.conf` puts the stock ruleset back.
	mustRun(t, e, "", pfctlPath, "-f", "/etc/pf.conf")
	if got := mustRun(t, e, "", pfctlPath, "-s", "dummynet").stdout; got != "dummynet-anchor \"com.apple/*\" all\n" {
		t.Errorf("after reload: %q", got)
	}
	o := mustRun(t, e, "", pfctlPath, "-F", "all")
	if !strings.HasSuffix(o.stderr, "rules cleared\nnat cleared\ndummynet cleared\n0 tables deleted.\n0 states cleared\nsource tracking entries cleared\npf: statistics cleared\npf: interface flags reset\n") {
		t.Errorf("-F all on main: %q", o.stderr)
	}
	if got := mustRun(t, e, "", pfctlPath, "-s", "dummynet").stdout; got != "" {
		t.Errorf("-F all should un-hook: %q", got)
	}
}

func TestPfctlWithoutRoot(t *testing.T) {
	e := newTestEmulator()
	e.SetPrivileged(false)
	if o := run(t, e, "", pfctlPath, "-s", "info"); o.code != 1 || o.stderr != "pfctl: /dev/pf: Permission denied\n" {
		t.Errorf("non-root: %+v", o)
	}
	if o := run(t, e, "dummynet out on en0 all pipe 1\n", pfctlPath, "-nf", "-"); o.code != 0 {
		t.Errorf("non-root -n: %+v", o)
	}
}

func TestPfctlUsageErrors(t *testing.T) {
	e := newTestEmulator()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-s", "bogus"}, "pfctl: Unknown show modifier 'bogus'\n" + pfctlUsage},
		{[]string{"-F", "bogus"}, "pfctl: Unknown flush modifier 'bogus'\n" + pfctlUsage},
		{[]string{"-y"}, "/sbin/pfctl: illegal option -- y\n" + pfctlUsage},
		{[]string{"-s"}, "/sbin/pfctl: option requires an argument -- s\n" + pfctlUsage},
	} {
		if o := run(t, e, "", append([]string{pfctlPath}, c.args...)...); o.code != 1 || o.stderr != c.want {
			t.Errorf("pfctl %v: %+v", c.args, o)
		}
	}
}

func TestProbeReportsBlackholing(t *testing.T) {
	e := newTestEmulator()
	pkt := Packet{Interface: "en0", Out: true, Proto: "tcp", Src: netip.MustParseAddrPort("192.168.1.23:52144"), Dst: netip.MustParseAddrPort("93.184.216.34:443")}
	if r := e.Probe(pkt); r.Verdict != Unshaped || r.Reason != "pf is disabled" {
		t.Errorf("pf off: %+v", r)
	}
	enableRef(t, e)
	mustRun(t, e, "dummynet out on en0 all pipe 48001\n", pfctlPath, "-a", "com.apple/macake", "-f", "-")
	if r := e.Probe(pkt); r.Verdict != Unshaped || !strings.Contains(r.Reason, "dummynet is not loaded") {
		t.Errorf("dummynet not loaded: %+v", r)
	}
	mustRun(t, e, "", dnctlPath, "pipe", "48001", "config", "bw", "20000Kbit/s", "queue", "64Kbytes")
	if r := e.Probe(pkt); r.Verdict != Shaped || r.Pipe != 48001 {
		t.Errorf("shaped: %+v", r)
	}
	if r := e.Probe(Packet{Interface: "en1", Out: true, Proto: "tcp", Src: pkt.Src, Dst: pkt.Dst}); r.Verdict != Unshaped {
		t.Errorf("another interface: %+v", r)
	}
	e.DeletePipe(48001)
	if r := e.Probe(pkt); r.Verdict != Blackholed {
		t.Errorf("after the pipe was deleted: %+v", r)
	}
	e.DropHook()
	if r := e.Probe(pkt); r.Verdict != Unshaped {
		t.Errorf("without the hook: %+v", r)
	}
	// Rule counters move and show with -v.
	got := mustRun(t, e, "", pfctlPath, "-v", "-a", "com.apple/macake", "-s", "dummynet").stdout
	if !strings.Contains(got, "  [ Evaluations: 3         Packets: 2         Bytes: 3000        States: 0     ]\n") {
		t.Errorf("-v counters:\n%s", got)
	}
}

func TestProbeFlowSetIsAPanicRisk(t *testing.T) {
	e := newTestEmulator()
	enableRef(t, e)
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config", "bw", "1Mbit/s")
	mustRun(t, e, "", dnctlPath, "queue", "2", "config", "pipe", "1")
	mustRun(t, e, "dummynet out on en0 all queue 2\n", pfctlPath, "-a", "com.apple/x", "-f", "-")
	if r := e.Probe(Packet{Interface: "en0", Out: true, Proto: "udp", Src: netip.MustParseAddrPort("10.0.0.1:1"), Dst: netip.MustParseAddrPort("10.0.0.2:2")}); r.Verdict != Panic {
		t.Errorf("queue: %+v", r)
	}
}

func TestRebootClearsVolatileState(t *testing.T) {
	e := newTestEmulator()
	fresh := e.Snapshot().String()
	enableRef(t, e)
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config")
	mustRun(t, e, "dummynet out on en0 all pipe 1\n", pfctlPath, "-a", "com.apple/macake", "-f", "-")
	e.Reboot()
	if got := e.Snapshot().String(); got != fresh {
		t.Errorf("after reboot:\n%s\nwant:\n%s", got, fresh)
	}
}

func TestPfctlAnchorsListing(t *testing.T) {
	e := newTestEmulator()
	// Only the system can make "_" anchors; pfctl refuses to.
	e.with(func(m *Machine) {
		m.Rulesets["com.apple/_hidden"] = rulesetOf([]Rule{{Type: TypeDummynet, Action: "dummynet", Direction: "out", PipeKind: "pipe", Pipe: 1}}, nil)
	})
	mustRun(t, e, "dummynet out on en0 all pipe 1\n", pfctlPath, "-a", "com.apple/macake/sub", "-f", "-")
	if got := mustRun(t, e, "", pfctlPath, "-a", "com.apple", "-s", "Anchors").stdout; got != "  com.apple/250.ApplicationFirewall\n  com.apple/macake\n" {
		t.Errorf("-s Anchors: %q", got)
	}
	want := "  com.apple/250.ApplicationFirewall\n  com.apple/_hidden\n  com.apple/macake\n  com.apple/macake/sub\n"
	if got := mustRun(t, e, "", pfctlPath, "-v", "-a", "com.apple", "-s", "Anchors").stdout; got != want {
		t.Errorf("-v -s Anchors:\n%s\nwant:\n%s", got, want)
	}
}

func TestErrorMessagesEscapeControlCharacters(t *testing.T) {
	// reference §8.5: err(3) prints control characters escaped.
	e := newTestEmulator()
	o := run(t, e, "", dnctlPath, "pipe", "1", "config", "\x01\x1b\a\tx")
	if o.code != 65 || o.stderr != "dnctl: unrecognised option ``\\001\\033\\a\tx''\n" {
		t.Errorf("got %+v", o)
	}
}
