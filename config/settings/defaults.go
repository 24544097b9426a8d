// SPDX-License-Identifier: Apache-2.0

package settings

import "runtime"

// DefaultStateDir is where the state file lives unless --state-dir or
// state_dir says otherwise: DefaultStateDirFor the running system.
var DefaultStateDir = DefaultStateDirFor(runtime.GOOS)

// DefaultStateDirFor is the default state directory on goos: where that
// system keeps a daemon's state, /var/db on macOS (as its own daemons
// do) and /var/lib on Linux (the FHS, and Debian, whose systemd units
// name it with StateDirectory=).
func DefaultStateDirFor(goos string) string {
	if goos == "linux" {
		return "/var/lib/macake"
	}
	return "/var/db/macake"
}

// DefaultOperatorGroupFor is the default operator_group on goos: admin
// on macOS, the group of the Mac's administrators, who may run sudo
// anyway; none on Linux, which has no group every administrator shares
// (sudo, wheel and adm differ by distribution).
func DefaultOperatorGroupFor(goos string) string {
	if goos == "darwin" {
		return "admin"
	}
	return NoOperatorGroup
}

// DaemonDefaults are the defaults of the daemon settings file.
var DaemonDefaults = Daemon{
	StateDir:          DefaultStateDir,
	Anchor:            "com.apple/macake",
	PipeRange:         PipeRange{First: 48001, Last: 48998},
	LogFormat:         LogText,
	StatusPageControl: true,
	OperatorGroup:     DefaultOperatorGroupFor(runtime.GOOS),
	MQTT:              MQTTDefaults,
}
