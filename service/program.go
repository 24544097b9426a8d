// SPDX-License-Identifier: Apache-2.0

package service

import (
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// ThrottleInterval is the minimum seconds between two starts of a job, on
// both systems (launchd's ThrottleInterval, systemd's RestartSec). A job
// that fails at start (bad config, missing binary) is retried at this
// pace: slow enough not to flood the log, quick enough that a fixed
// policy file is picked up within half a minute without anyone acting.
const ThrottleInterval = 30

// Program is what a service runs: the macake binary and the global flags it
// gets, so the service uses exactly the directories the installer was given.
type Program struct {
	// Binary is the absolute path of the macake executable.
	Binary string
	// ConfigDir and StateDir are absolute; they become --config-dir and --state-dir.
	ConfigDir string
	StateDir  string
}

// Validate checks that every path is absolute (launchd and systemd start
// jobs with / as the working directory and expand nothing) and printable:
// valid UTF-8 without control characters, which neither a plist nor a
// unit file can carry.
func (p Program) Validate() error {
	for _, f := range []struct{ flag, path string }{{"--binary", p.Binary}, {"--config-dir", p.ConfigDir}, {"--state-dir", p.StateDir}} {
		if f.path == "" {
			return fmt.Errorf("%s is empty", f.flag)
		}
		if !filepath.IsAbs(f.path) {
			return fmt.Errorf("%s %q is not an absolute path; a service has no working directory to resolve it against", f.flag, f.path)
		}
		if !utf8.ValidString(f.path) {
			return fmt.Errorf("%s %q is not valid UTF-8, which a service file cannot carry", f.flag, f.path)
		}
		for _, r := range f.path {
			if r < 0x20 || r == 0x7f {
				return fmt.Errorf("%s %q contains a control character, which a service file cannot carry", f.flag, f.path)
			}
		}
	}
	return nil
}

// Args returns the argv that runs command (e.g. "watch") with p's flags.
func (p Program) Args(command string) []string {
	return []string{p.Binary, "--config-dir", p.ConfigDir, "--state-dir", p.StateDir, command}
}

// ParseArgs recognises the argv a service of macake runs:
// BINARY --config-dir DIR --state-dir DIR watch, optionally followed by
// --log-file PATH (the LaunchDaemon's), for a doctor that checks it.
func ParseArgs(args []string) (Program, error) {
	if len(args) == 8 && args[6] == "--log-file" {
		args = args[:6]
	}
	if len(args) != 6 || args[1] != "--config-dir" || args[3] != "--state-dir" || args[5] != "watch" {
		return Program{}, fmt.Errorf("it runs %q, not `macake --config-dir DIR --state-dir DIR watch`", strings.Join(args, " "))
	}
	return Program{Binary: args[0], ConfigDir: args[2], StateDir: args[4]}, nil
}
