// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/macake/macake/bugreport"
	"github.com/macake/macake/cmd/macake/internal/bugreportbuild"
	"github.com/macake/macake/cmd/macake/internal/exitcode"
)

var bugreportCmd = &command{
	name:  "bugreport",
	args:  "[--out FILE] [--no-redact] [--log-lines N] [--selftest]",
	short: "Write one file with what a bug report needs, MAC addresses and SSIDs masked.",
	long: `Collects, into one text file: the version; the OS and architecture; what
'doctor --json', 'status --json', 'links --json' and 'plan --show-commands'
print (each as it would on its own, with its exit status); every policy
file and macake.toml as they are; and the daemon's last log lines: its
log_file, else the file the running watch writes (its --log-file), else
on macOS its log and launchd's file of what it printed before its log was
open, on Linux systemd's journal of macake-watch.service. --selftest adds
'selftest --json', which makes scratch objects and loads them with a few
seconds of traffic.

MAC addresses and Wi-Fi names (SSIDs) are masked, each distinct value by
one mask ([MAC-1], [SSID-1]) used everywhere in the file, so the report
still shows which policy matches which gateway without saying which
gateway it is. --no-redact keeps them. IP addresses are kept: they are
private ones, or the reflectors. Read the file before you share it.

Run it with sudo to include what only root can read (pf and dummynet on
macOS, the daemon's log). Without --selftest it changes nothing.

Exit status: 0 the report was written; 1 it could not be written; 64 usage.`,
}

func init() { bugreportCmd.run = runBugreport }

func runBugreport(e *env, args []string) int {
	fs := bugreportCmd.flags()
	out := fs.String("out", "", "write the report to `FILE` (- for standard output; default: macake-bugreport-DATE-TIME.txt here)")
	noRedact := fs.Bool("no-redact", false, "keep MAC addresses and Wi-Fi names (SSIDs) as they are")
	lines := fs.Int("log-lines", 200, "how many of the log's last lines to include")
	selftest := fs.Bool("selftest", false, "also run 'macake selftest' (scratch objects, a few seconds of traffic) and include its report")
	if done, code := bugreportCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	if *lines < 0 {
		fmt.Fprintln(e.stderr, "macake bugreport: --log-lines must not be negative")
		return exitcode.Usage
	}
	now := time.Now()
	rep, red := bugreportbuild.Build(bugreportbuild.Options{
		Ctx: e.ctx, Capture: e.capture, Getenv: e.getenv, EUID: e.euid(),
		ConfigDir: e.configDir, StateDir: e.stateDir, StateDirIsDefault: e.stateDir == defaultStateDir,
		Selftest: *selftest, LogLines: *lines, Redact: !*noRedact, Now: now,
	})
	var buf bytes.Buffer
	rep.Write(&buf, red)
	if *out == "-" {
		e.stdout.Write(buf.Bytes())
		return exitcode.OK
	}
	path, numbered := *out, false
	if path == "" {
		path, numbered = "macake-bugreport-"+now.Format("20060102-150405")+".txt", true
	}
	path, err := bugreport.Save(path, buf.Bytes(), numbered)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake bugreport: %v\n", err)
		return exitcode.Failure
	}
	what := "MAC addresses and SSIDs masked"
	if *noRedact {
		what = "NOT redacted"
	}
	fmt.Fprintf(e.stdout, "Wrote %s (%d KB, %s). Read it before you share it.\n", path, (buf.Len()+1023)/1024, what)
	return exitcode.OK
}

// capture runs one of macake's own commands in-process, with this run's
// directories, and returns its output as a section.
func (e *env) capture(args ...string) bugreport.Section {
	var out, errb bytes.Buffer
	child := &env{ctx: e.ctx, stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: e.getenv, euid: e.euid,
		configDir: e.configDir, stateDir: e.stateDir, configDirSet: e.configDirSet}
	code := child.dispatch(args)
	body := out.String()
	if errb.Len() > 0 {
		body += "\n--- stderr ---\n" + errb.String()
	}
	return bugreport.Section{Title: "macake " + strings.Join(args, " "), Body: body, Note: fmt.Sprintf("exit status %d", code)}
}
