// SPDX-License-Identifier: Apache-2.0

// Package menubar holds the test of the SwiftBar/xbar plugin beside it.
package menubar

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/macake/macake/internal/golden"
)

// recorded is the status document the daemon's test rig recorded.
const recorded = "../../daemon/statusapi/testdata/watch-status.json"

// variant is the recorded status with changes, as a JSON object.
func variant(t *testing.T, change func(st map[string]any)) []byte {
	t.Helper()
	st := golden.ReadJSON[map[string]any](t, recorded)
	if change != nil {
		change(st)
	}
	out, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func link(st map[string]any) map[string]any { return st["links"].([]any)[0].(map[string]any) }

// TestPluginOutput runs the plugin with a fake macake that prints a
// recorded status document, under every POSIX shell here (Debian's sh is
// dash; macOS runs plugins with /bin/sh, which is bash or zsh in sh mode),
// and checks what the menu bar and the menu would show.
func TestPluginOutput(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("skipping: the plugin needs jq (apt-get install jq; .ci/run installs it)")
	}
	cases := map[string][]byte{
		"recorded": variant(t, nil),
		"bufferbloat": variant(t, func(st map[string]any) {
			c := link(st)["controller"].(map[string]any)
			c["status"] = "running"
			d := c["download"].(map[string]any)
			d["bufferbloat"], d["window_average_seconds"], d["achieved_bits_per_second"], d["load_percent"] = true, 0.0412, 47.6e6, 99
		}),
		"not-running": variant(t, func(st map[string]any) {
			st["daemon"] = map[string]any{"running": false, "socket": "/var/db/macake/watch.sock", "note": "nothing answers on /var/db/macake/watch.sock"}
			l := link(st)
			delete(l, "controller")
			for _, s := range l["shapers"].([]any) {
				delete(s.(map[string]any), "stats")
			}
		}),
		"problems": variant(t, func(st map[string]any) {
			st["problems"] = []any{"pf.conf lacks the line that evaluates macake's anchor:\n  dummynet-anchor \"com.apple/*\""}
			st["config_errors"] = []any{map[string]any{"file": "/etc/macake/links.d/travel.toml", "line": 5, "column": 12, "message": `download: "70mbps" is ambiguous; did you mean "70mbit"?`}}
			link(st)["shapers"].([]any)[0].(map[string]any)["not_shaped"] = "another tool's root qdisc is in the way"
		}),
		"no-link": variant(t, func(st map[string]any) { st["links"] = []any{} }),
		"permission-denied": variant(t, func(st map[string]any) {
			st["daemon"] = map[string]any{"running": true, "pid": 412, "permission_denied": true, "socket": "/var/db/macake/watch.sock",
				"note": "its socket answers root and group admin only; run with sudo for its view"}
			delete(link(st), "controller")
		}),
		"paused": variant(t, func(st map[string]any) {
			st["pauses"] = []any{
				map[string]any{"link": "*", "since": "2026-12-01T13:34:05Z", "until": "2026-12-01T14:04:05Z", "remaining_seconds": 1690, "by": "bench"},
				map[string]any{"link": "home", "since": "2026-12-01T14:00:00Z", "until": "2026-12-01T15:00:00.5Z", "remaining_seconds": 3890, "by": "alice"},
			}
			l := link(st)
			l["paused_until"], l["shapers"], l["shaped"] = "2026-12-01T15:00:00.5Z", []any{}, false
			delete(l, "controller")
		}),
	}
	shells := []string{}
	for _, sh := range []string{"sh", "bash", "dash"} {
		if _, err := exec.LookPath(sh); err == nil {
			shells = append(shells, sh)
		}
	}
	plugin, _ := filepath.Abs("macake.5s.sh")
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			docPath := filepath.Join(dir, "status.json")
			fake := filepath.Join(dir, "macake")
			os.WriteFile(docPath, doc, 0o644)
			os.WriteFile(fake, []byte("#!/bin/sh\n[ \"$*\" = \"status --json\" ] || exit 64\ncat "+docPath+"\n"), 0o755)
			var first string
			for _, sh := range shells {
				cmd := exec.Command(sh, plugin)
				cmd.Env = append(os.Environ(), "MACAKE="+fake, "MACAKE_STATUS_PAGE=http://127.0.0.1:9847/", "TZ=UTC")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", sh, err, out)
				}
				// Its items run the plugin again, by its path here.
				out = []byte(strings.ReplaceAll(string(out), plugin, "PLUGIN"))
				if first == "" {
					first = string(out)
					golden.Check(t, filepath.Join("testdata", name+".txt"), out, "what the menu bar and its menu show")
				} else if string(out) != first {
					t.Errorf("%s prints differently from %s:\n%s", sh, shells[0], out)
				}
			}
			if lines := strings.Split(first, "\n"); len(lines) < 3 || lines[1] != "---" {
				t.Errorf("the first line is the menu bar's, then ---:\n%s", first)
			}
		})
	}

	// Without a macake that answers, the menu says so instead of failing.
	cmd := exec.Command("sh", plugin)
	cmd.Env = append(os.Environ(), "MACAKE=/nonexistent/macake")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "macake ? | color=") || !strings.Contains(string(out), "is macake installed?") {
		t.Errorf("without macake: %v\n%s", err, out)
	}
}

// TestPluginItems: a menu item runs the plugin again with macake's words,
// which it passes to macake; when macake says this user may not (77), the
// plugin asks macOS to run it as an administrator (osascript's password
// prompt); another failure becomes a notification.
func TestPluginItems(t *testing.T) {
	plugin, _ := filepath.Abs("macake.5s.sh")
	for _, c := range []struct {
		name string
		exit int
		want []string
	}{
		{"allowed", 0, []string{"macake: pause --for 15m home"}},
		{"refused", 77, []string{"macake: pause --for 15m home",
			`osascript: -e do shell script "'MACAKE' pause --for 15m home" with administrator privileges`}},
		{"failed", 1, []string{"macake: pause --for 15m home",
			`osascript: -e display notification "macake pause: no policy is named  home/  failed" with title "macake pause"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			calls := filepath.Join(dir, "calls")
			fake := filepath.Join(dir, "macake")
			os.WriteFile(fake, []byte(fmt.Sprintf("#!/bin/sh\necho \"macake: $*\" >> %s\necho 'macake pause: no policy is named \"home\\\" failed' >&2\nexit %d\n", calls, c.exit)), 0o755)
			os.WriteFile(filepath.Join(dir, "osascript"), []byte("#!/bin/sh\necho \"osascript: $*\" >> "+calls+"\n"), 0o755)
			cmd := exec.Command("sh", plugin, "pause", "--for", "15m", "home")
			cmd.Env = append(os.Environ(), "MACAKE="+fake, "PATH="+dir+":"+os.Getenv("PATH"))
			if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
				t.Fatalf("the item: %v\n%s", err, out)
			}
			b, _ := os.ReadFile(calls)
			got := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(b), fake, "MACAKE")), "\n")
			if !slices.Equal(got, c.want) {
				t.Errorf("ran:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
