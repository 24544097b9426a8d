// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"time"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/daemon/operator"
	"github.com/macake/macake/daemon/statusapi"
)

// TestBugreportHasEverythingAndLeaksNoMACOrSSID: the report holds the
// version, the system, doctor, status, links and the plan, the policy
// files, macake.toml and the log's last lines, and no MAC address or SSID
// survives redaction: not in the policies, not in the log lines, not in
// the commands' output.
func TestBugreportHasEverythingAndLeaksNoMACOrSSID(t *testing.T) {
	policy := strings.Replace(starlinkPolicy, "[shaper]", "ssid = \"Home Net 5G\"\n[shaper]", 1)
	facts := `{"interfaces":[{"name":"en0","up":true,"default":true,"gateway_ip":"192.168.1.1","gateway_mac":"74:24:9f:00:00:01","ssid":"Home Net 5G"}]}`
	r := newRig(t, map[string]string{"starlink": policy, "cafe": strings.Replace(cablePolicy, "a4:91:b1:00:00:02", "00:1B:63:0A:0B:0C", 1)}, facts)
	logFile := filepath.Join(t.TempDir(), "watch.log")
	os.WriteFile(logFile, []byte(strings.Repeat("level=INFO msg=old\n", 300)+
		`level=INFO msg="link changed" event=link_change interface=en0 from=cafe to=starlink reason="gateway 0:1b:63:a:b:c -> 74:24:9f:00:00:01, ssid Corner Cafe -> Home Net 5G"`+"\n"+
		`level=INFO msg=reconciled event=apply result=applied`+"\n"), 0o644)
	os.WriteFile(filepath.Join(filepath.Dir(r.configDir), "macake.toml"), []byte("log_file = \""+logFile+"\"\n"), 0o644)
	r.mustRun(exitcode.OK, "apply")

	out := filepath.Join(t.TempDir(), "report.txt")
	stdout, _ := r.mustRun(exitcode.OK, "bugreport", "--out", out, "--log-lines", "5")
	mustContain(t, "bugreport's output", stdout, "Wrote "+out, "masked")
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	mustContain(t, "the report", report,
		"===== version =====", "===== system =====",
		"===== macake doctor --json (exit status", "===== macake status --json (exit status 0)",
		"===== macake links --json (exit status 0)", "===== macake plan --show-commands --color never (exit status 0)",
		"No changes.", "starlink.toml =====", "cafe.toml =====", "macake.toml =====",
		"===== last log lines of "+logFile+" (5 lines) =====", `msg=reconciled`,
		"gateway_mac = \"[MAC-1]\"", "ssid = \"[SSID-1]\"", `"profile_key": "starlink@[MAC-1]"`)
	// It changes nothing, as it says: no selftest unless asked (issue
	// 27, item 15).
	mustContain(t, "the report", report, "===== macake selftest --json (not run: it makes scratch objects and sends traffic; add --selftest to include it) =====")
	for _, leak := range []string{"74:24:9f", "00:1b:63", "00:1B:63", "0:1b:63", "Home Net", "Corner Cafe"} {
		if strings.Contains(report, leak) {
			i := strings.Index(report, leak)
			t.Errorf("%q leaked into the report: …%s…", leak, report[max(0, i-200):min(len(report), i+100)])
		}
	}
	// The café's gateway is one MAC however it is written.
	mustContain(t, "the log line", report, "gateway [MAC-2] -> [MAC-1], ssid [SSID-2] -> [SSID-1]")
	if strings.Count(report, "msg=old") > 3 {
		t.Errorf("more log lines than --log-lines 5")
	}

	// --no-redact keeps them; - writes to stdout.
	stdout, _ = r.mustRun(exitcode.OK, "bugreport", "--out", "-", "--no-redact")
	mustContain(t, "the unredacted report", stdout, "74:24:9f:00:00:01", "Home Net 5G", "Not redacted")
}

func TestBugreportUsage(t *testing.T) {
	for _, args := range [][]string{{"bugreport", "extra"}, {"bugreport", "--log-lines", "-1"}} {
		if code, _, stderr := runCLI(t, args...); code != exitcode.Usage || stderr == "" {
			t.Errorf("macake %v: exit %d, %q", args, code, stderr)
		}
	}
}

// TestBugreportFindsTheLogOfTheRunningWatch: a watch started with
// --log-file (launchd's daemon, or by hand) says where it logs; the report
// shows that file's last lines, where it said "-- No entries --" from a
// journal the daemon never wrote to (issue 27, item 15).
func TestBugreportFindsTheLogOfTheRunningWatch(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	logFile := filepath.Join(t.TempDir(), "watch.log")
	os.WriteFile(logFile, []byte("level=INFO msg=\"watch started\" event=start\n"), 0o644)
	ln, err := statusapi.Listen(statusapi.SocketPath(r.stateDir), operator.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go statusapi.Serve(ctx, ln, statusapi.Handler{Status: func(context.Context, statusapi.Query) statusapi.Status {
		return statusapi.Status{FormatVersion: statusapi.FormatVersion, Daemon: statusapi.Daemon{Running: true, PID: 4242, LogFile: logFile}}
	}}, nil)
	stdout, _ := r.mustRun(exitcode.OK, "bugreport", "--out", "-")
	mustContain(t, "the report", stdout, "===== last log lines of "+logFile+" (1 lines) =====", `msg="watch started"`)
}

// TestBugreportWritesANewPrivateFile: the report is readable by its
// owner alone, never written through a file or link already under its
// name (a link planted under the default name in a shared directory had
// root overwrite the file it pointed at), and under --out an existing
// file is refused rather than overwritten (issue 27).
func TestBugreportWritesANewPrivateFile(t *testing.T) {
	r := newRig(t, map[string]string{"starlink": starlinkPolicy}, starlinkFacts)
	dir := t.TempDir()
	t.Chdir(dir)
	victim := filepath.Join(t.TempDir(), "root-only")
	os.WriteFile(victim, []byte("keep\n"), 0o600)
	// Links under every name the report could take this minute and the
	// next, as a user who guesses the time would plant them.
	for _, at := range []time.Time{time.Now(), time.Now().Add(time.Minute)} {
		for s := range 60 {
			name := "macake-bugreport-" + at.Truncate(time.Minute).Add(time.Duration(s)*time.Second).Format("20060102-150405") + ".txt"
			os.Symlink(victim, filepath.Join(dir, name))
		}
	}
	stdout, _ := r.mustRun(exitcode.OK, "bugreport", "--log-lines", "0")
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Fatalf("the report was written through a planted link: the file it pointed at holds %d bytes", len(b))
	}
	name := strings.TrimSuffix(strings.TrimPrefix(strings.Fields(stdout)[1], "./"), "")
	info, err := os.Lstat(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("%v (stdout %q)", err, stdout)
	}
	if !info.Mode().IsRegular() || info.Mode().Perm() != 0o600 {
		t.Errorf("the report %s: %v, want a regular file of mode 0600", name, info.Mode())
	}
	// --out an existing file: refused, the file unchanged.
	if code, _, stderr := r.run("bugreport", "--out", victim); code != exitcode.Failure || !strings.Contains(stderr, "exists") {
		t.Errorf("bugreport --out an existing file: exit %d, %q", code, stderr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Error("--out an existing file overwrote it")
	}
}
