// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/macake/macake/bugreport"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/daemon/statusapi"
	"github.com/macake/macake/doctor/machine"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/sense/linkfacts"
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
	if done, code := bugreportCmd.parse(e, fs, args); done {
		return code
	}
	if done, code := bugreportCmd.noArgs(e, fs); done {
		return code
	}
	if *lines < 0 {
		fmt.Fprintln(e.stderr, "macake bugreport: --log-lines must not be negative")
		return exitUsage
	}
	now := time.Now()
	rep := &bugreport.Report{Made: now, Redacted: !*noRedact}
	rep.Add(bugreport.Section{Title: "version", Body: e.capture("version").Body})
	rep.Add(bugreport.Section{Title: "system", Body: fmt.Sprintf("%s, %s/%s, run as uid %d\nconfig dir %s, state dir %s\n%s",
		machine.OSVersion(), runtime.GOOS, runtime.GOARCH, e.euid(), e.configDir, e.stateDir, macakeEnv(e))})
	for _, argv := range [][]string{{"doctor", "--json"}, {"status", "--json"}, {"links", "--json"}, {"plan", "--show-commands", "--color", "never"}} {
		rep.Add(e.capture(argv...))
	}
	if *selftest {
		rep.Add(e.capture("selftest", "--json"))
	} else {
		rep.Add(bugreport.Section{Title: "macake selftest --json", Note: "not run: it makes scratch objects and sends traffic; add --selftest to include it"})
	}
	for _, s := range bugreport.PolicyFiles(e.configDir) {
		rep.Add(s)
	}
	for _, s := range bugreport.Logs(e.ctx, execrun.Exec{}, e.logSources(), *lines) {
		rep.Add(s)
	}

	var red *bugreport.Redactor
	if !*noRedact {
		var ssids []string
		if facts, err := linkfacts.Read(e.ctx, e.getenv); err == nil {
			for _, i := range facts.Interfaces {
				ssids = append(ssids, i.SSID)
			}
		}
		red = bugreport.NewRedactor(ssids...)
	}
	var buf bytes.Buffer
	rep.Write(&buf, red)
	if *out == "-" {
		e.stdout.Write(buf.Bytes())
		return exitOK
	}
	path, numbered := *out, false
	if path == "" {
		path, numbered = "macake-bugreport-"+now.Format("20060102-150405")+".txt", true
	}
	path, err := bugreport.Save(path, buf.Bytes(), numbered)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake bugreport: %v\n", err)
		return exitFailure
	}
	what := "MAC addresses and SSIDs masked"
	if *noRedact {
		what = "NOT redacted"
	}
	fmt.Fprintf(e.stdout, "Wrote %s (%d KB, %s). Read it before you share it.\n", path, (buf.Len()+1023)/1024, what)
	return exitOK
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

// macakeEnv lists the MACAKE_* variables that are set: they change what
// macake reads and runs.
func macakeEnv(e *env) string {
	var set []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "MACAKE_") || k == "NO_COLOR" {
			set = append(set, k+"="+e.getenv(k))
		}
	}
	if len(set) == 0 {
		return "no MACAKE_* variables set"
	}
	return "environment: " + strings.Join(set, " ")
}

// logSources says where the daemon's log is: macake.toml's log_file, the
// file the running watch says it writes to, else the service's place.
func (e *env) logSources() bugreport.LogSources {
	settings, _, _ := settings.LoadDaemon(settings.DaemonFileFor(e.configDir), config.LoadOptions{SkipOwnershipCheck: true})
	src := bugreport.LogSources{SettingsFile: settings.LogFile, GOOS: runtime.GOOS}
	ctx, cancel := context.WithTimeout(e.ctx, time.Second)
	defer cancel()
	if st, err := statusapi.Fetch(ctx, statusapi.SocketPath(settings.StateDirFor(e.stateDir, e.stateDir == defaultStateDir))); err == nil {
		src.WatchFile = st.Daemon.LogFile
	}
	return src
}
