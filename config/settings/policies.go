// SPDX-License-Identifier: Apache-2.0

package settings

import (
	"strings"

	"github.com/hashicorp/go-multierror"
	"github.com/macake/macake/config"
)

// Policies is the configuration one pass reads: the policy files of a
// directory and the daemon settings beside it.
type Policies struct {
	// Dir is the policy directory (links.d).
	Dir string
	// Links are the valid policies, in file-name order.
	Links []config.Link
	// Warnings are the policy files' and the settings' warnings.
	Warnings []config.Warning
	// Settings are the daemon settings (defaults when the file is absent).
	Settings Daemon
	// SettingsFile is where the settings were looked for.
	SettingsFile string
}

// LoadPolicies reads the daemon settings (DaemonFileFor(dir)) and
// every policy file in dir. The error holds every problem of every file
// (config.Problems lists them, each FILE:LINE:COL); Links then holds the
// files that are valid, and Settings the defaults if the settings file is
// the broken one.
func LoadPolicies(dir string, opts config.LoadOptions) (Policies, error) {
	p := Policies{Dir: dir, SettingsFile: DaemonFileFor(dir)}
	settings, swarn, serr := LoadDaemon(p.SettingsFile, opts)
	p.Settings = settings
	links, lwarn, lerr := config.Load(dir, opts)
	p.Links = links
	p.Warnings = append(swarn, lwarn...)
	// One flat list, so that Problems sees every problem of both.
	all := multierror.Append(serr, lerr)
	all.ErrorFormat = func(es []error) string {
		lines := make([]string, len(es))
		for i, e := range es {
			lines[i] = e.Error()
		}
		return strings.Join(lines, "\n")
	}
	return p, all.ErrorOrNil()
}
