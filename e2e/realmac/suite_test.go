// SPDX-License-Identifier: Apache-2.0

package realmac

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/selftest/loopback"
	"github.com/macake/macake/sense/linkfacts"
)

// What the suite owns: never macake's defaults, so a macake installed on
// the Mac is not disturbed.
const (
	testAnchor    = "com.apple/macake-realmac"
	foreignAnchor = "com.apple/macake-realmac-other"
	firstPipe     = 65100
	lastPipe      = 65199
	// foreignPipe is inside the suite's range but never macake's.
	foreignPipe = 65150
)

// toolset is what a test runs against: the tools' paths, the environment
// macake needs for them, and whether traffic through them can be timed.
type toolset struct {
	pfctl, dnctl string
	env          []string
	// packets is "" when the tools shape real packets; otherwise why not.
	packets string
}

// mac is one run of the suite: a config directory, a state directory, the
// macake binary and the tools.
type mac struct {
	t         *testing.T
	tools     toolset
	macake    string
	dir       string
	configDir string
	stateDir  string
	env       []string
}

func newMac(t *testing.T) *mac {
	t.Helper()
	ts := tools(t)
	m := &mac{t: t, tools: ts, macake: macakeBinary(t), dir: t.TempDir()}
	m.configDir = filepath.Join(m.dir, "links.d")
	m.stateDir = filepath.Join(m.dir, "state")
	if err := os.Mkdir(m.configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// macake creates only its default state directory by itself.
	if err := os.Mkdir(m.stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	settings := fmt.Sprintf("anchor = %q\npipe_range = { first = %d, last = %d }\n", testAnchor, firstPipe, lastPipe)
	facts := filepath.Join(m.dir, "facts.json")
	for path, text := range map[string]string{
		filepath.Join(m.dir, "macake.toml"): settings,
		facts:                               `{"interfaces":[{"name":"lo0","up":true}]}`,
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.env = append([]string{"NO_COLOR=1", linkfacts.EnvFile + "=" + facts, "MACAKE_PFCTL=" + ts.pfctl, "MACAKE_DNCTL=" + ts.dnctl, "MACAKE_BACKEND=pf"}, ts.env...)
	t.Cleanup(func() {
		// Whatever a failed test left of macake's: down, always.
		m.run("down")
	})
	return m
}

// run runs a macake command and returns its exit status and output.
func (m *mac) run(args ...string) (int, string) {
	m.t.Helper()
	argv := append([]string{m.macake, "--config-dir", m.configDir, "--state-dir", m.stateDir}, args...)
	res, err := execrun.Exec{Timeout: 2 * time.Minute, Env: m.env}.Run(context.Background(), execrun.Command{Argv: argv})
	if err != nil {
		m.t.Fatalf("macake %s: %v", strings.Join(args, " "), err)
	}
	return res.ExitCode, string(res.Stdout) + string(res.Stderr)
}

// must runs a macake command that must exit with want.
func (m *mac) must(want int, args ...string) string {
	m.t.Helper()
	code, out := m.run(args...)
	if code != want {
		m.t.Fatalf("macake %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, out)
	}
	return out
}

// converged requires a plan with no changes.
func (m *mac) converged(after string) {
	m.t.Helper()
	if code, out := m.run("apply", "--dry-run", "--detailed-exitcode"); code != 0 || !strings.Contains(out, "No changes.") {
		m.t.Fatalf("after %s the plan is not empty (exit %d):\n%s", after, code, out)
	}
}

// policies replaces the config directory's files with these.
func (m *mac) policies(files map[string]string) {
	m.t.Helper()
	entries, _ := os.ReadDir(m.configDir)
	for _, e := range entries {
		os.Remove(filepath.Join(m.configDir, e.Name()))
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(m.configDir, name+".toml"), []byte(text), 0o644); err != nil {
			m.t.Fatal(err)
		}
	}
}

// tool runs pfctl or dnctl directly, as another tool would.
func (m *mac) tool(stdin string, argv ...string) execrun.Result {
	m.t.Helper()
	switch argv[0] {
	case "pfctl":
		argv[0] = m.tools.pfctl
	case "dnctl":
		argv[0] = m.tools.dnctl
	}
	res, err := execrun.Exec{Env: m.tools.env}.Run(context.Background(), execrun.Command{Argv: argv, Stdin: stdin})
	if err != nil {
		m.t.Fatalf("%v: %v", argv, err)
	}
	return res
}

var (
	ageRE    = regexp.MustCompile(`\d+ days \d\d:\d\d:\d\d`)
	uptimeRE = regexp.MustCompile(`Status: Enabled for \d+ days \d\d:\d\d:\d\d +`)
	flowRE   = regexp.MustCompile(`(?m)^ *\d+ \S+ +\S+/\d+ +\S+/\d+ +\d+ +\d+ +\d+ +\d+ +\d+\n`)
)

// snapshot reads everything macake could touch, with only the clocks and
// the flow counters of other tools' traffic left out: pf's status and
// references (tokens included), the main ruleset's dummynet rules, the
// anchors under com.apple, the suite's anchor, and every pipe.
func (m *mac) snapshot() string {
	m.t.Helper()
	var b strings.Builder
	for _, argv := range [][]string{
		{"pfctl", "-s", "info"},
		{"pfctl", "-s", "References"},
		{"pfctl", "-s", "dummynet"},
		{"pfctl", "-a", "com.apple", "-s", "Anchors"},
		{"pfctl", "-a", testAnchor, "-s", "dummynet"},
		{"dnctl", "list"},
	} {
		res := m.tool("", argv...)
		out := string(res.Stdout)
		if len(argv) > 2 && argv[2] == "info" {
			out, _, _ = strings.Cut(out, "\n")
		}
		out = flowRE.ReplaceAllString(ageRE.ReplaceAllString(uptimeRE.ReplaceAllString(out, "Status: Enabled "), "<age>"), "")
		fmt.Fprintf(&b, "$ %s (exit %d)\n%s", strings.Join(argv, " "), res.ExitCode, out)
		for _, l := range strings.Split(string(res.Stderr), "\n") {
			if l != "" && !strings.Contains(l, "ALTQ") {
				fmt.Fprintf(&b, "stderr: %s\n", l)
			}
		}
	}
	return b.String()
}

// untouched requires the Mac to be as snapshot before says.
func (m *mac) untouched(before, after string) {
	m.t.Helper()
	if got := m.snapshot(); got != before {
		m.t.Fatalf("after %s the Mac is not as it was:\n%s\nwant:\n%s", after, got, before)
	}
}

func fixed(down, up, queue string) string {
	return fmt.Sprintf("[match]\ninterface = \"lo0\"\n[shaper]\nmode = \"fixed\"\ndownload = %q\nupload = %q\nqueue = %q\n[autorate]\nreflectors = [\"192.0.2.1\", \"192.0.2.2\", \"192.0.2.3\"]\n", down, up, queue)
}

// TestApplyReplanChangeDown is the life of one policy: apply, apply
// again (nothing to do), change the rate (one update), down (as before).
func TestApplyReplanChangeDown(t *testing.T) {
	m := newMac(t)
	before := m.snapshot()
	m.policies(map[string]string{"loop": fixed("900mbit", "800mbit", "256KB")})
	if out := m.must(0, "apply"); !strings.Contains(out, fmt.Sprintf("+ pipe %d", firstPipe)) || !strings.Contains(out, "Applied: 4 created") {
		t.Fatalf("first apply:\n%s", out)
	}
	m.converged("the first apply")
	if out := m.must(0, "apply"); !strings.Contains(out, "No changes.") {
		t.Fatalf("second apply:\n%s", out)
	}
	m.policies(map[string]string{"loop": fixed("700mbit", "800mbit", "256KB")})
	if out := m.must(0, "apply"); !strings.Contains(out, fmt.Sprintf("~ pipe %d", firstPipe+1)) || !strings.Contains(out, "Applied: 0 created, 1 updated, 0 removed") {
		t.Fatalf("the rate change:\n%s", out)
	}
	m.converged("the rate change")
	m.must(0, "down")
	m.untouched(before, "down")
	if out := m.must(0, "down"); !strings.Contains(out, "No changes.") {
		t.Fatalf("a second down:\n%s", out)
	}
}

var seedFlag = flag.Uint64("realmac.seed", 0, "seed of TestConvergesInRandomOrder's order (0: from the clock)")

// TestConvergesInRandomOrder moves through policy sets in a seeded random
// order: after every apply the plan is empty; down restores the Mac.
func TestConvergesInRandomOrder(t *testing.T) {
	m := newMac(t)
	before := m.snapshot()
	sets := []map[string]string{
		{"loop": fixed("900mbit", "800mbit", "256KB")},
		{"loop": fixed("50mbit", "10mbit", "64KB")},
		{"loop": strings.Replace(fixed("100mbit", "20mbit", "128KB"), `"192.0.2.3"`, `"192.0.2.7", "2001:db8::1"`, 1)},
		{"loop": strings.Replace(fixed("100mbit", "20mbit", "128KB"), `mode = "fixed"`, `mode = "off"`, 1)},
		{"elsewhere": strings.Replace(fixed("100mbit", "20mbit", "128KB"), `"lo0"`, `"en9"`, 1)},
		{"loop": fixed("60mbit", "6mbit", "32KB"), "other": strings.Replace(fixed("1gbit", "1gbit", "1023KB"), "[match]\n", "[match]\npriority = 5\n", 1)},
		{},
	}
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (repeat with -realmac.seed %d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	for round := range len(sets) + 3 {
		i := rng.IntN(len(sets))
		m.policies(sets[i])
		code, out := m.run("apply")
		if code != 0 {
			t.Fatalf("round %d, set %d: exit %d\n%s", round, i, code, out)
		}
		m.converged(fmt.Sprintf("round %d (set %d)", round, i))
	}
	m.must(0, "down")
	m.untouched(before, "down")
}

// TestRepairsDrift: another hand changes or deletes macake's pipe, or
// flushes its anchor; the next apply repairs exactly that.
func TestRepairsDrift(t *testing.T) {
	m := newMac(t)
	before := m.snapshot()
	m.policies(map[string]string{"loop": fixed("900mbit", "800mbit", "256KB")})
	m.must(0, "apply")
	up, down := fmt.Sprint(firstPipe), fmt.Sprint(firstPipe+1)
	for _, d := range []struct {
		name  string
		stdin string
		argv  []string
		want  string
	}{
		{"a pipe reconfigured", "", []string{"dnctl", "pipe", up, "config", "bw", "1000Kbit/s"}, "~ pipe " + up},
		{"a pipe deleted", "", []string{"dnctl", "pipe", "delete", down}, "+ pipe " + down},
		{"the anchor flushed", "", []string{"pfctl", "-a", testAnchor, "-F", "all"}, "+ rules"},
	} {
		if res := m.tool(d.stdin, d.argv...); res.ExitCode != 0 {
			t.Fatalf("%s: %s", d.name, res.Stderr)
		}
		if out := m.must(0, "apply"); !strings.Contains(out, d.want) {
			t.Fatalf("after %s the apply lacks %q:\n%s", d.name, d.want, out)
		}
		m.converged(d.name)
	}
	m.must(0, "down")
	m.untouched(before, "down")
}

// TestSurvivesFailingTools: a dnctl or pfctl call that fails mid-apply
// makes that apply fail; the next one converges, and down restores the
// Mac. The failure is injected by a wrapper in front of the real tool.
func TestSurvivesFailingTools(t *testing.T) {
	for _, f := range []struct{ tool, match string }{
		{"dnctl", fmt.Sprintf("pipe %d config", firstPipe+1)},
		{"pfctl", "-a " + testAnchor + " -f -"},
		{"pfctl", "-E"},
	} {
		t.Run(f.tool+" "+f.match, func(t *testing.T) {
			m := newMac(t)
			before := m.snapshot()
			m.policies(map[string]string{"loop": fixed("900mbit", "800mbit", "256KB")})
			m.injectFailure(f.tool, f.match)
			if code, out := m.run("apply"); code != 1 {
				t.Fatalf("apply with %s %q failing: exit %d\n%s", f.tool, f.match, code, out)
			}
			m.must(0, "apply")
			m.converged("the apply after the failure")
			m.must(0, "down")
			m.untouched(before, "down")
		})
	}
}

// injectFailure puts a wrapper in front of tool that fails, once, the
// first call whose arguments contain match.
func (m *mac) injectFailure(tool, match string) {
	m.t.Helper()
	real := m.tools.pfctl
	if tool == "dnctl" {
		real = m.tools.dnctl
	}
	wrapper := filepath.Join(m.dir, tool)
	// dnctl's file mode (macake batches pipe configurations into one
	// `dnctl /dev/stdin`) carries the commands on stdin: match those too.
	script := fmt.Sprintf(`#!/bin/sh
fired=%[2]q
fail() { if [ ! -e "$fired" ]; then : > "$fired"; echo "%[3]s: injected failure" >&2; exit 1; fi; }
if [ "$#" -eq 1 ] && [ "$1" = /dev/stdin ]; then
	in=$(cat)
	case " $(printf '%%s' "$in" | tr '\n' ' ') " in *%[1]q*) fail;; esac
	printf '%%s\n' "$in" | %[4]q /dev/stdin
	exit $?
fi
case " $* " in *%[1]q*) fail;; esac
exec %[4]q "$@"
`, " "+match+" ", wrapper+".fired", tool, real)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		m.t.Fatal(err)
	}
	for i, kv := range m.env {
		if strings.HasPrefix(kv, "MACAKE_"+strings.ToUpper(tool)+"=") {
			m.env[i] = "MACAKE_" + strings.ToUpper(tool) + "=" + wrapper
		}
	}
}

// TestLeavesOtherToolsAlone: another tool's pipe inside macake's range and
// its anchor beside macake's stay exactly as they are through apply and
// down.
func TestLeavesOtherToolsAlone(t *testing.T) {
	m := newMac(t)
	if res := m.tool("", "dnctl", "pipe", fmt.Sprint(foreignPipe), "config", "bw", "2000Kbit/s", "delay", "20"); res.ExitCode != 0 {
		t.Fatal(string(res.Stderr))
	}
	rule := fmt.Sprintf("dummynet out quick on lo0 proto tcp from any to 127.0.0.1 port 9 pipe %d\n", foreignPipe)
	if res := m.tool(rule, "pfctl", "-a", foreignAnchor, "-f", "-"); res.ExitCode != 0 {
		t.Fatal(string(res.Stderr))
	}
	t.Cleanup(func() {
		m.tool("", "pfctl", "-a", foreignAnchor, "-F", "all")
		m.tool("", "dnctl", "pipe", "delete", fmt.Sprint(foreignPipe))
	})
	before := m.snapshot()
	foreign := func() string {
		return string(m.tool("", "dnctl", "pipe", "show", fmt.Sprint(foreignPipe)).Stdout) + string(m.tool("", "pfctl", "-a", foreignAnchor, "-s", "dummynet").Stdout)
	}
	was := foreign()
	m.policies(map[string]string{"loop": fixed("900mbit", "800mbit", "256KB")})
	if out := m.must(0, "apply"); !strings.Contains(out, fmt.Sprint(foreignPipe)) {
		t.Fatalf("apply must warn about the foreign pipe in its range:\n%s", out)
	}
	m.converged("the apply")
	if now := foreign(); now != was {
		t.Fatalf("the other tool's objects changed:\n%s\nwant:\n%s", now, was)
	}
	m.must(0, "down")
	m.untouched(before, "down")
}

// TestAppliedPolicyShapesLoopback: a fixed policy on lo0 shapes TCP on
// lo0 to its rate. On lo0 a packet crosses pf twice (out, then in), so it
// passes both pipes: the rate is the lower of the two.
func TestAppliedPolicyShapesLoopback(t *testing.T) {
	m := newMac(t)
	if m.tools.packets != "" {
		t.Skip("skipping: " + m.tools.packets)
	}
	before := m.snapshot()
	m.policies(map[string]string{"loop": fixed("80mbit", "20mbit", "256KB")})
	m.must(0, "apply")
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := loopback.Serve(ln)
	defer srv.Close()
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp4", srv.Addr().String())
	}
	meas, err := loopback.Measure(context.Background(), srv, dial, loopback.Config{Duration: 4 * time.Second})
	m.must(0, "down")
	if err != nil {
		t.Fatal(err)
	}
	v, err := loopback.Judge(meas, loopback.Expectation{RateBits: 20_000_000, QueueBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("measured %s; the upload pipe %s", v.Measured(), v.Model())
	if v.RateRatio < loopback.MinRateRatio || v.RateRatio > loopback.MaxRateRatio {
		t.Errorf("loopback TCP ran at %.0f %% of the 20 Mbit/s pipe", 100*v.RateRatio)
	}
	m.untouched(before, "down")
}
