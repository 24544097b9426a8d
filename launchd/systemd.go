// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/macake/macake/execrun"
)

// SystemdWatchCapabilities are the only capabilities the watch unit keeps
// (CapabilityBoundingSet=): CAP_NET_ADMIN for tc, IFB devices and their
// filters, CAP_NET_RAW for the ICMP probes. Root without the others cannot
// load modules, read others' files or mount; the kernel still loads a
// qdisc's module on demand.
var SystemdWatchCapabilities = []string{"CAP_NET_ADMIN", "CAP_NET_RAW"}

// systemdStateBase is where systemd's StateDirectory= lives.
const systemdStateBase = "/var/lib/"

// StateDirMode is the state directory's mode under systemd: only root
// writes or lists it, and everyone may pass through to the status socket
// in it, whose own mode and group (the operator group) say who may talk
// to the daemon.
const StateDirMode = "0711"

// SystemdWatchUnit renders macake-watch.service, the Linux counterpart of
// the LaunchDaemon: `macake watch` as root, restarted on failure after
// ThrottleInterval seconds, except on exit 77 (needs root) and 78 (config
// invalid), which need a person; systemd can say that, launchd cannot.
// stdout and stderr go to the journal. It is sandboxed: a read-only
// system, only SystemdWatchCapabilities, no new privileges; the state
// directory is the one place it writes (StateDirectory= when it is under
// /var/lib, which systemd creates with StateDirMode, else
// ReadWritePaths=, which must exist).
func SystemdWatchUnit(p Program) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	exec, err := systemdExecLine(p.Args("watch"))
	if err != nil {
		return nil, err
	}
	stateLines, err := systemdStateLines(p.StateDir)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("# macake watch under systemd: the Linux counterpart of the " + DaemonLabel + " LaunchDaemon.\n")
	b.WriteString("# Install: macake install-daemon --systemd-unit | sudo tee /etc/systemd/system/macake-watch.service\n")
	if !strings.HasPrefix(p.StateDir, systemdStateBase) {
		mkdir := execrun.Command{Argv: []string{"sudo", "install", "-d", "-m", StateDirMode, p.StateDir}}
		b.WriteString("#          " + mkdir.String() + "   (ReadWritePaths= needs it to exist)\n")
	}
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
	b.WriteString("TimeoutStopSec=15\n")
	b.WriteString("# Sandbox: see systemd.exec(5) and `systemd-analyze security macake-watch`.\n")
	b.WriteString("CapabilityBoundingSet=" + strings.Join(SystemdWatchCapabilities, " ") + "\n")
	b.WriteString("NoNewPrivileges=yes\n")
	b.WriteString("ProtectSystem=strict\n")
	b.WriteString("ProtectHome=read-only\n")
	b.WriteString(stateLines)
	b.WriteString("PrivateTmp=yes\n")
	b.WriteString("ProtectKernelTunables=yes\n")
	b.WriteString("ProtectKernelLogs=yes\n")
	b.WriteString("ProtectControlGroups=yes\n")
	b.WriteString("ProtectClock=yes\n")
	b.WriteString("ProtectHostname=yes\n")
	b.WriteString("RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK\n")
	b.WriteString("RestrictNamespaces=yes\n")
	b.WriteString("RestrictRealtime=yes\n")
	b.WriteString("RestrictSUIDSGID=yes\n")
	b.WriteString("LockPersonality=yes\n")
	b.WriteString("MemoryDenyWriteExecute=yes\n")
	b.WriteString("SystemCallArchitectures=native\n\n")
	b.WriteString("[Install]\n")
	b.WriteString("WantedBy=multi-user.target\n")
	return []byte(b.String()), nil
}

// systemdStateLines are the unit's lines that let watch write its state
// directory dir, an absolute path: StateDirectory= for a directory under
// /var/lib (systemd creates it, StateDirMode), else ReadWritePaths=. Both
// take specifiers (so % is doubled) and unquote double-quoted words with
// C escapes (so a path with blanks is quoted), but expand no variables.
func systemdStateLines(dir string) (string, error) {
	for _, r := range dir {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("state directory %q contains a control character, which a systemd unit cannot hold", dir)
		}
	}
	word := func(path string) string {
		w := strings.ReplaceAll(path, "%", "%%")
		if strings.ContainsAny(w, " \t\"'\\") {
			w = strconv.Quote(w)
		}
		return w
	}
	if rel, ok := strings.CutPrefix(dir, systemdStateBase); ok && strings.Trim(rel, "/") != "" {
		return "StateDirectory=" + word(strings.TrimSuffix(rel, "/")) + "\nStateDirectoryMode=" + StateDirMode + "\n", nil
	}
	return "ReadWritePaths=" + word(dir) + "\n", nil
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
