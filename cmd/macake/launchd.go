// SPDX-License-Identifier: Apache-2.0

package main

var installDaemonCmd = &command{
	name:  "install-daemon",
	short: "Install and start the launchd LaunchDaemon that runs `macake watch`.",
}

var uninstallDaemonCmd = &command{
	name:  "uninstall-daemon",
	short: "Stop and remove the LaunchDaemon, then run `macake down`.",
}

var installAgentCmd = &command{
	name:  "install-agent",
	short: "Install a user LaunchAgent that runs `macake monitor`.",
}

var uninstallAgentCmd = &command{
	name:  "uninstall-agent",
	short: "Remove the user LaunchAgent.",
}

func init() {
	for _, c := range []*command{installDaemonCmd, uninstallDaemonCmd, installAgentCmd, uninstallAgentCmd} {
		c.run = notImplemented(c)
	}
}
