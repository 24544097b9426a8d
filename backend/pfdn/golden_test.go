// SPDX-License-Identifier: Apache-2.0

package pfdn_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/pfdn/pfdntest"
	"github.com/macake/macake/internal/golden"
	"github.com/macake/macake/shape"
)

// TestDiffGolden runs every case in testdata/diff: desired.json (a
// shape.State), optionally known.json (link name → slot, as the state file
// holds them; without it, the slots the script's @apply lines recorded),
// live.txt (a script that builds the live state on a fresh
// emulated Mac) and want.txt (the plan as a plain listing of ops and
// commands, warnings, and the hook error if any).
//
// live.txt holds one command per line, run as another tool would:
//
//	dnctl pipe 48001 config bw 1000Kbit/s      (dnctl or pfctl argv)
//	pfctl -a com.apple/x -f - <<EOF            (stdin until a line EOF)
//	@apply FILE.json    macake applies that state first (its token is held)
//	@hold TOKEN         macake holds TOKEN (e.g. a stale one)
//	@reference NAME     daemon NAME takes a pf enable reference
//	@disable-pf  @reboot  @drop-hook  @delete-anchor PATH
//	@probe IF in|out    one packet through pf
func TestDiffGolden(t *testing.T) {
	for _, dir := range golden.Glob(t, filepath.Join("testdata", "diff", "*")) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			desired := golden.ReadJSON[shape.State](t, filepath.Join(dir, "desired.json"))
			h := newHarness(t, nil)
			h.e.SetClock(func() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) })
			runScript(t, h, dir)
			live, err := h.b.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			d, err := pfdn.Render(desired, h.b.Options())
			if err != nil {
				t.Fatal(err)
			}
			// The state file's slots: what @apply recorded, unless
			// known.json says otherwise ({} for a lost state file).
			d.KnownLinks = h.known
			if b, err := os.ReadFile(filepath.Join(dir, "known.json")); err == nil {
				d.KnownLinks = nil
				if err := json.Unmarshal(b, &d.KnownLinks); err != nil {
					t.Fatal(err)
				}
			}
			p := pfdn.Diff(d, live, h.tokens.PFToken())
			got := listing(p)
			if err := pfdn.CheckHook(d, live); err != nil {
				got += "error: " + err.Error()
			}
			got = tokenRE.ReplaceAllString(got, "-X <token>")
			golden.Check(t, filepath.Join(dir, "want.txt"), []byte(got), "the plan")
			// Pure: the same inputs give the same plan.
			if again := pfdn.Diff(d, live, h.tokens.PFToken()); listing(again) != listing(p) {
				t.Error("Diff is not deterministic")
			}
		})
	}
}

// The token value depends on the emulator's generator; the listing names
// it generically.
var tokenRE = regexp.MustCompile(`-X \d+`)

func runScript(t *testing.T, h *harness, dir string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "live.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		words := strings.Fields(line)
		switch words[0] {
		case "@apply":
			h.converge(ctx, golden.ReadJSON[shape.State](t, filepath.Join(dir, words[1])))
		case "@hold":
			h.tokens.SetPFToken(words[1])
		case "@reference":
			h.e.TakeReference(500, words[1])
		case "@disable-pf":
			h.e.DisablePF()
		case "@reboot":
			h.e.Reboot()
		case "@drop-hook":
			h.e.DropHook()
		case "@delete-anchor":
			h.e.DeleteAnchor(words[1])
		case "@probe":
			h.e.Probe(pfdntest.Packet{Interface: words[1], Out: words[2] == "out", Proto: "tcp",
				Src: netip.MustParseAddrPort("192.168.1.23:52144"), Dst: netip.MustParseAddrPort("93.184.216.34:443"), Bytes: 1500})
		case "pfctl", "dnctl":
			stdin := ""
			if words[len(words)-1] == "<<EOF" {
				words = words[:len(words)-1]
				var b strings.Builder
				for sc.Scan() && sc.Text() != "EOF" {
					b.WriteString(sc.Text() + "\n")
				}
				stdin = b.String()
			}
			argv := append([]string{map[string]string{"pfctl": "/sbin/pfctl", "dnctl": "/usr/sbin/dnctl"}[words[0]]}, words[1:]...)
			res, err := h.e.Foreign(ctx, stdin, argv...)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("live.txt: %s: %v exit %d: %s", line, err, res.ExitCode, res.Stderr)
			}
		default:
			t.Fatalf("live.txt: unknown line %q", line)
		}
	}
}

func TestGoldenHarnessRejectsBadScripts(t *testing.T) {
	// The script runner must not silently skip lines; this guards the
	// golden cases themselves.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "live.txt"), []byte("dnctl pipe 1 config\n"), 0o644)
	h := newHarness(t, nil)
	runScript(t, h, dir)
	if _, ok := h.e.Snapshot().Pipes[1]; !ok {
		t.Error("script command did not run")
	}
}
