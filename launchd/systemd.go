// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"fmt"
	"strconv"
	"strings"
)

// SystemdWatchUnit renders macake-watch.service, the Linux counterpart of
// the LaunchDaemon: `macake watch` as root, restarted on failure after
// ThrottleInterval seconds, except on exit 77 (needs root) and 78 (config
// invalid), which need a person; systemd can say that, launchd cannot.
// stdout and stderr go to the journal.
func SystemdWatchUnit(p Program) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	exec, err := systemdExecLine(p.Args("watch"))
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("# macake watch under systemd: the Linux counterpart of the " + DaemonLabel + " LaunchDaemon.\n")
	b.WriteString("# Install: macake install-daemon --systemd-unit | sudo tee /etc/systemd/system/macake-watch.service\n")
	b.WriteString("#          sudo systemctl daemon-reload && sudo systemctl enable --now macake-watch\n")
	b.WriteString("# Logs:    journalctl -u macake-watch\n")
	b.WriteString("[Unit]\n")
	b.WriteString("Description=macake: latency-driven adaptive bandwidth shaping (watch)\n")
	b.WriteString("Documentation=https://github.com/macake/macake\n")
	b.WriteString("Wants=network-online.target\n")
	b.WriteString("After=network-online.target\n\n")
	b.WriteString("[Service]\n")
	b.WriteString("Type=simple\n")
	b.WriteString("ExecStart=" + exec + "\n")
	b.WriteString("Restart=on-failure\n")
	fmt.Fprintf(&b, "RestartSec=%d\n", ThrottleInterval)
	b.WriteString("RestartPreventExitStatus=77 78\n")
	b.WriteString("TimeoutStopSec=15\n\n")
	b.WriteString("[Install]\n")
	b.WriteString("WantedBy=multi-user.target\n")
	return []byte(b.String()), nil
}

// SystemdMonitorUnit renders macake-monitor.service, a systemd user unit
// running `macake monitor`, the counterpart of the LaunchAgent.
func SystemdMonitorUnit(p Program) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	exec, err := systemdExecLine(p.Args("monitor"))
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("# macake monitor as a systemd user service: the Linux counterpart of the " + AgentLabel + " LaunchAgent.\n")
	b.WriteString("# Install: mkdir -p ~/.config/systemd/user\n")
	b.WriteString("#          macake install-agent --systemd-unit > ~/.config/systemd/user/macake-monitor.service\n")
	b.WriteString("#          systemctl --user daemon-reload && systemctl --user enable --now macake-monitor\n")
	b.WriteString("# Unprivileged ICMP needs your group inside net.ipv4.ping_group_range.\n")
	b.WriteString("[Unit]\n")
	b.WriteString("Description=macake: latency monitor, no shaping\n")
	b.WriteString("Documentation=https://github.com/macake/macake\n\n")
	b.WriteString("[Service]\n")
	b.WriteString("Type=simple\n")
	b.WriteString("ExecStart=" + exec + "\n")
	b.WriteString("Restart=on-failure\n")
	fmt.Fprintf(&b, "RestartSec=%d\n", ThrottleInterval)
	b.WriteString("RestartPreventExitStatus=64 78\n\n")
	b.WriteString("[Install]\n")
	b.WriteString("WantedBy=default.target\n")
	return []byte(b.String()), nil
}

// systemdExecLine quotes argv for ExecStart= (systemd.service(5), "Command
// lines"): words with blanks, quotes or backslashes are double-quoted with
// C escapes; % and $ are doubled so systemd expands neither specifiers nor
// variables inside a path.
func systemdExecLine(argv []string) (string, error) {
	words := make([]string, len(argv))
	for i, a := range argv {
		for _, r := range a {
			if r < 0x20 || r == 0x7f {
				return "", fmt.Errorf("argument %q contains a control character, which a systemd unit cannot hold", a)
			}
		}
		w := strings.NewReplacer("%", "%%", "$", "$$").Replace(a)
		if w == "" || w == ";" || strings.ContainsAny(w, " \"'\\") {
			w = strconv.Quote(w)
		}
		words[i] = w
	}
	return strings.Join(words, " "), nil
}
