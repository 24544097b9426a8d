// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/macake/macake/execrun"
)

// firstLine returns the listing line of the only pipe.
func pipeListing(t *testing.T, e *Emulator, n string) string {
	t.Helper()
	line, _, _ := strings.Cut(mustRun(t, e, "", dnctlPath, "pipe", n, "show").stdout, "\n")
	return line
}

func TestDnctlNumberTraps(t *testing.T) {
	// reference §1.4: strtoul(…, 0) stops at the first non-digit, honours
	// octal and hex, and knows only K, k and M.
	for _, c := range []struct{ bw, want string }{
		{"1.5Mbit/s", "  1.000 bit/s "},
		{"010", "  8.000 bit/s "},
		{"0x10Kbit/s", " 16.000 Kbit/s"},
		{"1mbit/s", "  1.000 bit/s "},
		{"1Gbit/s", "  1.000 bit/s "},
		{"1MByte/s", "  8.000 Mbit/s"},
		{"1Mbytes/s", "  8.000 Mbit/s"},
		{"300Kbit/s", "300.000 Kbit/s"},
		{"0", "unlimited"},
		{"en0", "en0"},
		{"4295Mbit/s", " 32.704 Kbit/s"}, // wraps silently (reference §8.3)
		{"268MByte/s", "2144.000 Mbit/s"},
		{"2147Mbit/s", "2147.000 Mbit/s"},
	} {
		e := newTestEmulator()
		mustRun(t, e, "", dnctlPath, "pipe", "7", "config", "bw", c.bw)
		if got := pipeListing(t, e, "7"); !strings.HasPrefix(got, "00007: "+c.want+" ") {
			t.Errorf("bw %s: %q, want rate %q", c.bw, got, c.want)
		}
	}
	for _, c := range []struct{ args, want string }{
		{"queue 10Kbytes", "  10 KB 0"},
		{"queue 1500B", "  1500 B 0"},
		{"queue 1500bytes", "  1500 B 0"},
		{"queue 1M", "    1 sl. 0"},
		{"queue 0", "   50 sl. 0"},
		{"queue 1024Kbytes", "  1024 KB 0"},
		{"delay 25.5ms", "   25 ms"},
		{"delay 010", "    8 ms"},
		{"plr 0.005", "sl.plr 0.005000 0"},
		{"plr 7", "sl.plr 1.000000 0"},
	} {
		e := newTestEmulator()
		mustRun(t, e, "", append([]string{dnctlPath, "pipe", "7", "config"}, strings.Fields(c.args)...)...)
		if got := pipeListing(t, e, "7"); !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want it to contain %q", c.args, got, c.want)
		}
	}
}

func TestDnctlConfigIsAFullReplacement(t *testing.T) {
	e := newTestEmulator()
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config", "bw", "1Mbit/s", "queue", "20Kbytes", "plr", "0.1", "mask", "all")
	before := pipeListing(t, e, "1")
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config", "delay", "20")
	got := pipeListing(t, e, "1")
	// Everything not sent went back to its default, but the hash table
	// sized at creation stays (reference §1.6).
	if want := "00001: unlimited   20 ms   50 sl. 0 queues (64 buckets) droptail"; got != want {
		t.Errorf("after delay-only config:\n%q\nwant %q (before: %q)", got, want, before)
	}
}

func TestDnctlReconfigKeepsFlowCounters(t *testing.T) {
	e := newTestEmulator()
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config", "bw", "1Mbit/s")
	e.with(func(m *Machine) {
		account(&m.pipe(1).FS, Packet{Proto: "udp", Src: netip.MustParseAddrPort("10.0.0.1:1"), Dst: netip.MustParseAddrPort("10.0.0.2:2"), Bytes: 100})
	})
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config", "bw", "2Mbit/s")
	if got := mustRun(t, e, "", dnctlPath, "list").stdout; !strings.Contains(got, " 1 queues ") || !strings.Contains(got, "\n  0 udp         10.0.0.1/1            10.0.0.2/2        1      100  0    0   0\n") {
		t.Errorf("flow counters lost on reconfig:\n%s", got)
	}
}

func TestDnctlListingIsInHashOrder(t *testing.T) {
	e := newTestEmulator()
	for _, n := range []string{"1", "2", "16", "48001", "48002", "17"} {
		mustRun(t, e, "", dnctlPath, "pipe", n, "config", "bw", "1Mbit/s")
	}
	var order []string
	for _, l := range strings.Split(mustRun(t, e, "", dnctlPath, "list").stdout, "\n") {
		if n, _, ok := strings.Cut(l, ":"); ok && !strings.HasPrefix(l, " ") {
			order = append(order, n)
		}
	}
	// HASH(n) = ((n>>8)^(n>>4)^n)&0xf; newest first within a bucket:
	// 17 → 0; 48002, 16, 1 → 1; 48001, 2 → 2.
	want := "00017 48002 00016 00001 48001 00002"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("listing order %s, want %s", got, want)
	}
}

func TestDnctlBareDeleteDeletesAQueue(t *testing.T) {
	e := newTestEmulator()
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config", "bw", "1Mbit/s")
	mustRun(t, e, "", dnctlPath, "queue", "1", "config", "pipe", "1", "weight", "5")
	mustRun(t, e, "", dnctlPath, "delete", "1")
	got := mustRun(t, e, "", dnctlPath, "list").stdout
	if !strings.HasPrefix(got, "00001:") || strings.Contains(got, "q00001") {
		t.Errorf("bare delete 1 must delete queue 1 and keep pipe 1:\n%s", got)
	}
	// And a second bare delete finds no queue.
	o := run(t, e, "", dnctlPath, "delete", "1")
	if o.code != 1 || o.stderr != "dnctl: rule 1: setsockopt(IP_DUMMYNET_DEL): Invalid argument\n" {
		t.Errorf("second delete: %+v", o)
	}
}

func TestDnctlPipeDeleteTriesEveryNumber(t *testing.T) {
	e := newTestEmulator()
	mustRun(t, e, "", dnctlPath, "pipe", "3", "config")
	o := run(t, e, "", dnctlPath, "pipe", "delete", "7", "3", "1,2")
	if o.code != 1 || o.stderr != "dnctl: rule 7: setsockopt(IP_DUMMYNET_DEL): Invalid argument\ndnctl: rule 1: setsockopt(IP_DUMMYNET_DEL): Invalid argument\n" {
		t.Errorf("got %+v", o)
	}
	if got := mustRun(t, e, "", dnctlPath, "list").stdout; got != "" {
		t.Errorf("pipe 3 should be gone; listing %q", got)
	}
}

func TestDnctlErrors(t *testing.T) {
	// reference §1.5 and §8: message, exit code, and the blank line after
	// messages whose format ends in "\n".
	for _, c := range []struct {
		args   string
		code   int
		stderr string
	}{
		{"pipe 0 config bw 1Mbit/s", 65, "dnctl: pipe_nr must be > 0\n"},
		{"pipe config bw 1Mbit/s", 65, "dnctl: pipe_nr must be > 0\n"},
		{"pipe 1 config delay 2147484", 65, "dnctl: delay must be < 2147483 ms\n"},
		{"queue 1 config weight 5", 65, "dnctl: pipe must be > 0\n"},
		{"queue 1 config pipe 1 weight 101", 65, "dnctl: weight must be <= 100\n"},
		{"pipe 1 config queue 1025Kbytes", 65, "dnctl: queue size must be < 1MB\n"},
		{"pipe 1 config queue 101", 65, "dnctl: 2 <= queue size <= 100\n"},
		{"pipe 1 config bw 2148Mbit/s", 65, "dnctl: bandwidth too large\n"},
		{"pipe 1 config bw 269MByte/s", 65, "dnctl: bandwidth too large\n"},
		{"pipe 1 config bw", 64, "dnctl: bw needs bandwidth or interface\n\n"},
		{"pipe 1 config delay", 64, "dnctl: delay needs argument 0..2147483\n\n"},
		{"pipe 1 config queue", 64, "dnctl: queue needs queue size\n\n"},
		{"pipe 1 config plr", 64, "dnctl: plr needs argument 0..1\n\n"},
		{"pipe 1 config buckets", 64, "dnctl: buckets needs argument\n\n"},
		{"pipe 1 config mask", 64, "dnctl: mask needs mask specifier\n\n"},
		{"pipe 1 config mask dst-ip", 64, "dnctl: mask: value missing\n"},
		{"pipe 1 config mask dst-port 70000", 65, "dnctl: mask: must be 16 bit\n"},
		{"pipe 1 config mask proto 256", 65, "dnctl: mask: must be 8 bit\n"},
		{"pipe 1 config mask dst-ip6 129", 65, "dnctl: in6addr invalid mask len\n"},
		{"pipe 1 config red", 64, "dnctl: red/gred needs w_q/min_th/max_th/max_p\n\n"},
		{"pipe 1 config red 2/5/15/0.1", 65, "dnctl: 0 < w_q <= 1\n"},
		{"pipe 1 config red 0.002/5/15/2", 65, "dnctl: 0 < max_p <= 1\n"},
		{"pipe 1 config red 0.002/15/5/0.1", 65, "dnctl: min_th 15 must be < than max_th 5\n"},
		{"queue 1 config bw 1Mbit/s", 65, "dnctl: bandwidth only valid for pipes\n"},
		{"queue 1 config delay 5", 65, "dnctl: delay only valid for pipes\n"},
		{"pipe 1 config weight 5", 65, "dnctl: weight only valid for queues\n"},
		{"pipe 1 config pipe 2", 65, "dnctl: pipe only valid for queues\n"},
		{"queue 1 config weight", 64, "dnctl: weight needs argument 0..100\n\n"},
		{"queue 1 config pipe", 64, "dnctl: pipe needs pipe_number\n\n"},
		{"pipe 1 config bandwith 1Mbit/s", 65, "dnctl: unrecognised option ``bandwith''\n"},
		{"pipe 1 config bw 1Mbit/s all", 65, "dnctl: unrecognised option ``all''\n"},
		{"frobnicate", 64, "dnctl: bad command `frobnicate'\n"},
		{"config 1", 64, "dnctl: bad command `config'\n"},
		{"pipe", 64, "dnctl: missing command\n"},
		{"-q", 64, "dnctl: bad arguments, for usage summary ``dnctl''\n"},
		{"-x list", 64, "-x: illegal option -- x\n" + dnctlUsage},
		{"", 64, dnctlUsage},
		{"-h", 0, dnctlHelp},
	} {
		e := newTestEmulator()
		o := run(t, e, "", append([]string{dnctlPath}, strings.Fields(c.args)...)...)
		if o.code != c.code || o.stderr != c.stderr || o.stdout != "" {
			t.Errorf("dnctl %s: exit %d stderr %q stdout %q; want exit %d stderr %q", c.args, o.code, o.stderr, o.stdout, c.code, c.stderr)
		}
	}
}

func TestDnctlArgumentPreprocessing(t *testing.T) {
	e := newTestEmulator()
	// Single string: split, '#' ends it; number swaps; prefixes.
	mustRun(t, e, "", dnctlPath, "p 5 conf bw 5Kbit/s # comment")
	mustRun(t, e, "", dnctlPath, "6", "pipe", "config", "bw", "6Kbit/s") // "6 pipe" is swapped to "pipe 6"
	mustRun(t, e, "", dnctlPath, "pi", "config", "8", "bw", "8Kbit/s")
	got := mustRun(t, e, "", dnctlPath, "l").stdout
	for _, want := range []string{"00005:   5.000 Kbit/s", "00008:   8.000 Kbit/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("listing lacks %q:\n%s", want, got)
		}
	}
	// Comma joining: "1," + "2" is one word, and atoi reads 1.
	mustRun(t, e, "", dnctlPath, "pipe", "2", "config")
	o := run(t, e, "", dnctlPath, "pipe", "delete", "5,", "2")
	if o.code != 0 || strings.Contains(mustRun(t, e, "", dnctlPath, "list").stdout, "00005:") {
		t.Errorf("delete \"5,\" \"2\" should delete pipe 5 only: %+v", o)
	}
	if !strings.Contains(mustRun(t, e, "", dnctlPath, "list").stdout, "00002:") {
		t.Errorf("pipe 2 should remain")
	}
}

func TestDnctlTestOnlyAndPrivileges(t *testing.T) {
	e := newTestEmulator()
	e.SetPrivileged(false)
	if o := run(t, e, "", dnctlPath, "-n", "pipe", "1", "config", "bw", "1Mbit/s"); o.code != 0 || o.stderr != "" {
		t.Errorf("-n config without root: %+v", o)
	}
	if o := run(t, e, "", dnctlPath, "-n", "list"); o.code != 0 || o.stderr != "Testing only, list disabled\n" {
		t.Errorf("-n list: %+v", o)
	}
	if o := run(t, e, "", dnctlPath, "list"); o.code != 69 || o.stderr != "dnctl: socket: Operation not permitted\n" {
		t.Errorf("list without root: %+v", o)
	}
	e.SetPrivileged(true)
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config")
	if o := run(t, e, "", dnctlPath, "-n", "flush"); o.stdout != "Flushed all pipes.\n" || mustRun(t, e, "", dnctlPath, "list").stdout == "" {
		t.Errorf("-n flush must print and flush nothing: %+v", o)
	}
	if o := run(t, e, "", dnctlPath, "-q", "flush"); o.stdout != "" || mustRun(t, e, "", dnctlPath, "list").stdout != "" {
		t.Errorf("-q flush must flush silently: %+v", o)
	}
	res, err := e.Run(context.Background(), execrun.Command{Argv: []string{dnctlPath, "-s", "list"}})
	var ee *execrun.Error
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "segmentation fault") || len(res.Stdout) != 0 {
		t.Errorf("dnctl -s should crash: %v", err)
	}
}

func TestDnctlFileMode(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	e := newTestEmulator()
	good := write("good", "pipe 1 config bw 1Mbit/s\n\n# nothing\n-q flush\npipe 2 config bw 2Mbit/s\n")
	if o := run(t, e, "", dnctlPath, good); o.code != 0 || o.stdout != "" {
		t.Errorf("file mode: %+v", o)
	}
	// -q from line 4 stays on; pipe 1 was flushed.
	if got := mustRun(t, e, "", dnctlPath, "list").stdout; !strings.HasPrefix(got, "00002:") || strings.Contains(got, "00001:") {
		t.Errorf("after file: %q", got)
	}
	bad := write("bad", "pipe 3 config\npipe 4 config bw\npipe 5 config\n")
	if o := run(t, e, "", dnctlPath, bad); o.code != 64 || o.stderr != "Line 2: bw needs bandwidth or interface\n\n" {
		t.Errorf("file mode error: %+v", o)
	}
	got := mustRun(t, e, "", dnctlPath, "list").stdout
	if !strings.Contains(got, "00003:") || strings.Contains(got, "00005:") {
		t.Errorf("the first error must stop the file: %q", got)
	}
	illegal := write("illegal", "-x list\npipe 6 config\n")
	if o := run(t, e, "", dnctlPath, illegal); o.code != 0 || o.stderr != "-x: illegal option -- x\n" {
		t.Errorf("illegal option in a file only warns: %+v", o)
	}
	if o := run(t, e, "", dnctlPath, "-z", good); o.code != 64 || !strings.HasPrefix(o.stderr, "/usr/sbin/dnctl: illegal option -- z\n") {
		t.Errorf("bad option before a file: %+v", o)
	}
}

func TestDnctlQueueWeightAndNegativeValues(t *testing.T) {
	// reference §8.2 and §8.8.
	e := newTestEmulator()
	mustRun(t, e, "", dnctlPath, "pipe", "1", "config", "delay", "-1")
	mustRun(t, e, "", dnctlPath, "queue", "1", "config", "pipe", "1", "weight", "10")
	mustRun(t, e, "", dnctlPath, "queue", "1", "config", "pipe", "1", "weight", "50")
	mustRun(t, e, "", dnctlPath, "queue", "2", "config", "pipe", "1", "weight", "-1")
	mustRun(t, e, "", dnctlPath, "queue", "3", "config", "pipe", "1", "weight", "0")
	got := mustRun(t, e, "", dnctlPath, "list").stdout
	for _, want := range []string{
		"00001: unlimited   -1 ms   50 sl.",
		"q00001: weight 10 pipe 1 ", // weight is set only at creation
		"q00002: weight -1 pipe 1 ",
		"q00003: weight 1 pipe 1 ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("listing lacks %q:\n%s", want, got)
		}
	}
	if o := run(t, e, "", dnctlPath, "queue", "1", "config", "pipe", "2"); o.code != 1 || o.stderr != "dnctl: setsockopt(IP_DUMMYNET_CONFIGURE): Invalid argument\n" {
		t.Errorf("changing a queue's parent: %+v", o)
	}
	if o := run(t, e, "", dnctlPath, "pipe", "1", "config", "bw", "abcdefghijklmnopqrst"); o.code != 0 || !strings.HasPrefix(pipeListing(t, e, "1"), "00001: abcdefghijklmno    0 ms") {
		t.Errorf("interface name as bandwidth is cut to 15 bytes: %q", pipeListing(t, e, "1"))
	}
}

// /dev/stdin is a readable absolute path: dnctl reads its commands from
// its standard input in file mode, with file mode's "Line N:" errors.
func TestDnctlFileModeFromStdin(t *testing.T) {
	e := newTestEmulator()
	if o := run(t, e, "pipe 7 config bw 1Mbit/s\npipe 8 config bw 2Mbit/s\n", dnctlPath, "/dev/stdin"); o.code != 0 || o.stderr != "" {
		t.Errorf("file mode from stdin: %+v", o)
	}
	if got := mustRun(t, e, "", dnctlPath, "list").stdout; !strings.Contains(got, "00007:") || !strings.Contains(got, "00008:") {
		t.Errorf("after stdin: %q", got)
	}
	if o := run(t, e, "pipe 9 config bw 1Mbit/s\npipe 0 config bw 1Mbit/s\npipe 10 config\n", dnctlPath, "/dev/stdin"); o.code != 65 || o.stderr != "Line 2: pipe_nr must be > 0\n" {
		t.Errorf("file mode error from stdin: %+v", o)
	}
}

// A fault with a Match spoils a line of a file as it would the call the
// line stands for: Fail ends the file there with "Line N:", after the
// lines before it took effect.
func TestDnctlFileModeLineFaults(t *testing.T) {
	e := newTestEmulator()
	if err := e.AddFault(Fault{Match: `^dnctl pipe 12 config`, Kind: Fail, ExitCode: 65}); err != nil {
		t.Fatal(err)
	}
	o := run(t, e, "pipe 11 config bw 1Mbit/s\npipe 12 config bw 1Mbit/s\npipe 13 config bw 1Mbit/s\n", dnctlPath, "/dev/stdin")
	if o.code != 65 || o.stderr != "Line 2: injected failure (pfdntest)\n" {
		t.Errorf("line fault: %+v", o)
	}
	got := mustRun(t, e, "", dnctlPath, "list").stdout
	if !strings.Contains(got, "00011:") || strings.Contains(got, "00012:") || strings.Contains(got, "00013:") {
		t.Errorf("a failed line must end the file after the lines before it: %q", got)
	}
}
