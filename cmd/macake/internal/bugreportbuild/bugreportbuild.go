// SPDX-License-Identifier: Apache-2.0

// Package bugreportbuild gathers what `macake bugreport` writes: the
// version and the system, what macake's own inspecting commands print,
// the policy files and the daemon's last log lines, and the redactor of
// the MAC addresses and SSIDs in it. Package main runs the commands it
// captures and writes the file.
package bugreportbuild

import (
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

// Options are what a report is gathered from.
type Options struct {
	Ctx context.Context
	// Capture runs one of macake's own commands in-process, with this
	// run's directories, and returns its output as a section.
	Capture func(args ...string) bugreport.Section
	Getenv  func(string) string
	// EUID is who runs it: root sees more (pf and dummynet, the logs).
	EUID int
	// ConfigDir and StateDir are --config-dir and --state-dir;
	// StateDirIsDefault tells that --state-dir was left at its default.
	ConfigDir, StateDir string
	StateDirIsDefault   bool
	// Selftest adds 'selftest --json' (scratch objects, a few seconds of
	// traffic); LogLines is how many of the log's last lines to include.
	Selftest bool
	LogLines int
	// Redact masks MAC addresses and SSIDs.
	Redact bool
	Now    time.Time
}

// Build gathers the report's sections, and the redactor to write them
// with (nil without Redact).
func Build(o Options) (*bugreport.Report, *bugreport.Redactor) {
	rep := &bugreport.Report{Made: o.Now, Redacted: o.Redact}
	rep.Add(bugreport.Section{Title: "version", Body: o.Capture("version").Body})
	rep.Add(bugreport.Section{Title: "system", Body: fmt.Sprintf("%s, %s/%s, run as uid %d\nconfig dir %s, state dir %s\n%s",
		machine.OSVersion(), runtime.GOOS, runtime.GOARCH, o.EUID, o.ConfigDir, o.StateDir, macakeEnv(o.Getenv))})
	for _, argv := range [][]string{{"doctor", "--json"}, {"status", "--json"}, {"links", "--json"}, {"plan", "--show-commands", "--color", "never"}} {
		rep.Add(o.Capture(argv...))
	}
	if o.Selftest {
		rep.Add(o.Capture("selftest", "--json"))
	} else {
		rep.Add(bugreport.Section{Title: "macake selftest --json", Note: "not run: it makes scratch objects and sends traffic; add --selftest to include it"})
	}
	for _, s := range bugreport.PolicyFiles(o.ConfigDir) {
		rep.Add(s)
	}
	for _, s := range bugreport.Logs(o.Ctx, execrun.Exec{}, logSources(o), o.LogLines) {
		rep.Add(s)
	}
	if !o.Redact {
		return rep, nil
	}
	var ssids []string
	if facts, err := linkfacts.Read(o.Ctx, o.Getenv); err == nil {
		for _, i := range facts.Interfaces {
			ssids = append(ssids, i.SSID)
		}
	}
	return rep, bugreport.NewRedactor(ssids...)
}

// macakeEnv lists the MACAKE_* variables that are set: they change what
// macake reads and runs.
func macakeEnv(getenv func(string) string) string {
	var set []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "MACAKE_") || k == "NO_COLOR" {
			set = append(set, k+"="+getenv(k))
		}
	}
	if len(set) == 0 {
		return "no MACAKE_* variables set"
	}
	return "environment: " + strings.Join(set, " ")
}

// logSources says where the daemon's log is: macake.toml's log_file, the
// file the running watch says it writes to, else the service's place.
func logSources(o Options) bugreport.LogSources {
	settings, _, _ := settings.LoadDaemon(settings.DaemonFileFor(o.ConfigDir), config.LoadOptions{SkipOwnershipCheck: true})
	src := bugreport.LogSources{SettingsFile: settings.LogFile, GOOS: runtime.GOOS}
	ctx, cancel := context.WithTimeout(o.Ctx, time.Second)
	defer cancel()
	if st, err := statusapi.Fetch(ctx, statusapi.SocketPath(settings.StateDirFor(o.StateDir, o.StateDirIsDefault))); err == nil {
		src.WatchFile = st.Daemon.LogFile
	}
	return src
}
