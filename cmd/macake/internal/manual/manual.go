// SPDX-License-Identifier: Apache-2.0

// Package manual is what macake's manual page and completions say
// besides the command table: the description, the exit statuses, the
// environment, the files, what to see also, and how the values no flag
// type knows complete. Package main renders them with the commands
// (internal/clidoc).
package manual

import (
	"fmt"
	"strings"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/internal/clidoc"
	"github.com/macake/macake/internal/docsite"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/service/launchd"
	"github.com/macake/macake/service/systemd"
	"github.com/macake/macake/sim/linkmodel"
)

// Description is the manual's DESCRIPTION.
const Description = `macake brings cake-autorate's latency-driven shaping to macOS (pf and dummynet)
and Linux (tc), declaratively. Each network link is described in one TOML
policy file in /etc/macake/links.d; macake makes the shaper match those
files with the least change, and 'macake watch' then steers the shaper's
rates in real time from measured latency, so the queue forms in the
machine's shaper instead of in the ISP's bloated buffer.

Output that is data is printed on standard output ('--json' where it
applies); progress and warnings go to standard error. Colour is used only
on a terminal without NO_COLOR.`

// Hints complete what no flag type knows: flag values and the commands'
// positional arguments.
var Hints = clidoc.Hints{
	Values: map[string]clidoc.Completion{
		"sim --link":        {Words: linkmodel.Names},
		"sim --cc":          {Words: []string{"cubic", "reno"}},
		"sim --direction":   {Words: []string{"both", "download", "upload"}},
		"watch --log-level": {Words: []string{"debug", "info", "warn", "error"}},
		"--link":            {Kind: clidoc.Policies},
		"--mode":            {Words: modeNames()},
	},
	Operands: map[string]clidoc.Completion{
		"completion": {Words: clidoc.Shells},
		"apply":      {Kind: clidoc.Files}, // a saved plan
	},
}

func modeNames() []string {
	var out []string
	for _, m := range config.Modes {
		out = append(out, string(m))
	}
	return out
}

// Sections are the manual's sections after the commands, for the policy
// directory configDir and the state directory stateDir by default.
func Sections(configDir, stateDir string) []clidoc.Section {
	var exits []string
	for _, x := range exitcode.Statuses {
		exits = append(exits, fmt.Sprintf("%d\t%s", x.Code, x.Meaning))
	}
	env := []string{
		pfdn.EnvPfctl + "\tpath of pfctl (default " + pfdn.DefaultOptions().Pfctl + "); the tests point it at the emulator",
		pfdn.EnvDnctl + "\tpath of dnctl (default " + pfdn.DefaultOptions().Dnctl + ")",
		tc.EnvTC + ", " + tc.EnvIP + "\tpaths of tc and ip on Linux",
		backend.EnvBackend + "\tpf or tc: the shaping backend, instead of the one this system has",
		linkfacts.EnvFile + "\ta JSON file of link facts (interfaces, gateways, SSIDs) that replaces detection",
		"NO_COLOR\tno colour, even on a terminal",
	}
	files := []string{
		configDir + "/NAME.toml\tthe policy of link NAME",
		settings.DaemonFile + "\tthe daemon settings (optional)",
		stateDir + "/state.json\tthe state file: pipe slots, pf token, measured profiles",
		launchd.DaemonPlistPath + "\tthe LaunchDaemon that runs 'macake watch' (macOS)",
		launchd.DaemonLogPath + "\tthe daemon's log (macOS; on Linux the journal: journalctl -u " + systemd.UnitName + ")",
		systemd.UnitPath + "\tthe systemd unit that runs 'macake watch' (Linux)",
	}
	return []clidoc.Section{
		{Title: "Exit status", Body: strings.Join(exits, "\n")},
		{Title: "Environment", Body: strings.Join(env, "\n")},
		{Title: "Files", Body: strings.Join(files, "\n")},
		{Title: "See also", Body: "pfctl(8), dnctl(8), pf.conf(5), tc(8), launchd(8), launchctl(1), systemd.service(5), systemctl(1)\n\nThe documentation, at " + docsite.Docs + ": CONFIG.md (every key of a policy file), USAGE.md, OPERATIONS.md (the daemon), LINUX.md (tc and systemd), TROUBLESHOOTING.md."},
	}
}

// Date is the manual's date as a reproducible build stamps it: SOURCE_DATE_EPOCH
// (reproducible-builds.org) when set, else today.
func Date(getenv func(string) string) string {
	t := time.Now()
	var secs int64
	if _, err := fmt.Sscan(getenv("SOURCE_DATE_EPOCH"), &secs); err == nil {
		t = time.Unix(secs, 0)
	}
	return t.UTC().Format("January 2, 2006")
}
