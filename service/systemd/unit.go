// SPDX-License-Identifier: Apache-2.0

// Package systemd is the Linux backend of package service: it renders the
// system unit macake-watch.service for `macake watch` and the user unit
// macake-monitor.service for `macake monitor`, and installs, enables and
// starts them (or stops, disables and removes them) with systemctl,
// idempotently. It registers itself as the manager of linux.
package systemd

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/docsite"
	"github.com/macake/macake/service"
)

// UnitName is the system unit running `macake watch`; UnitPath where
// install-daemon writes it (the administrator's unit directory, which
// outranks a packaged unit of the same name).
const (
	UnitName = "macake-watch.service"
	UnitPath = "/etc/systemd/system/" + UnitName
)

// MonitorUnitName is the user unit running `macake monitor`.
const MonitorUnitName = "macake-monitor.service"

// MonitorUnitPath is where install-agent writes the user unit inside home.
func MonitorUnitPath(home string) string {
	return filepath.Join(home, ".config", "systemd", "user", MonitorUnitName)
}

// WatchCapabilities are the only capabilities the watch unit keeps
// (CapabilityBoundingSet=): CAP_NET_ADMIN for tc, IFB devices and their
// filters, CAP_NET_RAW for the ICMP probes. Root without the others cannot
// load modules, read others' files or mount; the kernel still loads a
// qdisc's module on demand.
var WatchCapabilities = []string{"CAP_NET_ADMIN", "CAP_NET_RAW"}

// stateBase is where systemd's StateDirectory= lives.
const stateBase = "/var/lib/"

// StateDirMode is the state directory's mode under systemd: only root
// writes or lists it, and everyone may pass through to the status socket
// in it, whose own mode and group (the operator group) say who may talk
// to the daemon.
const StateDirMode = "0711"

// stateDirPerm is StateDirMode as a permission, for the state directory
// install-daemon creates where the unit cannot (ReadWritePaths=).
const stateDirPerm fs.FileMode = 0o711

// WatchUnit renders macake-watch.service, the Linux counterpart of
// the LaunchDaemon: `macake watch` as root, restarted on failure after
// ThrottleInterval seconds, except on exit 77 (needs root) and 78 (config
// invalid), which need a person; systemd can say that, launchd cannot.
// stdout and stderr go to the journal. It is sandboxed: a read-only
// system, only WatchCapabilities, no new privileges; the state
// directory is the one place it writes (StateDirectory= when it is under
// /var/lib, which systemd creates with StateDirMode, else
// ReadWritePaths=, which must exist).
func WatchUnit(p service.Program) ([]byte, error) {
	exec, err := execStart(p, "watch")
	if err != nil {
		return nil, err
	}
	stateLines, err := stateLines(p.StateDir)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("# macake watch under systemd, as `sudo macake install-daemon` installs it.\n")
	b.WriteString("# By hand: macake install-daemon --systemd-unit | sudo tee " + UnitPath + "\n")
	if !strings.HasPrefix(p.StateDir, stateBase) {
		mkdir := execrun.Command{Argv: []string{"sudo", "install", "-d", "-m", StateDirMode, p.StateDir}}
		b.WriteString("#          " + mkdir.String() + "   (ReadWritePaths= needs it to exist)\n")
	}
	b.WriteString("#          sudo systemctl daemon-reload && sudo systemctl enable --now " + UnitName + "\n")
	b.WriteString("# Logs:    journalctl -u " + UnitName + "\n")
	b.WriteString("[Unit]\n")
	b.WriteString("Description=macake: latency-driven adaptive bandwidth shaping (watch)\n")
	b.WriteString("Documentation=" + docsite.Repo + "\n")
	b.WriteString("Wants=network-online.target\n")
	b.WriteString("After=network-online.target\n\n")
	serviceHead(&b, exec)
	b.WriteString("RestartPreventExitStatus=77 78\n")
	b.WriteString("TimeoutStopSec=15\n")
	b.WriteString("# Sandbox: see systemd.exec(5) and `systemd-analyze security macake-watch`.\n")
	b.WriteString("CapabilityBoundingSet=" + strings.Join(WatchCapabilities, " ") + "\n")
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

// stateLines are the unit's lines that let watch write its state
// directory dir, an absolute path: StateDirectory= for a directory under
// /var/lib (systemd creates it, StateDirMode), else ReadWritePaths=. Both
// take specifiers (so % is doubled) and unquote double-quoted words with
// C escapes (so a path with blanks is quoted), but expand no variables.
func stateLines(dir string) (string, error) {
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
	if rel, ok := strings.CutPrefix(dir, stateBase); ok && strings.Trim(rel, "/") != "" {
		return "StateDirectory=" + word(strings.TrimSuffix(rel, "/")) + "\nStateDirectoryMode=" + StateDirMode + "\n", nil
	}
	return "ReadWritePaths=" + word(dir) + "\n", nil
}

// MonitorUnit renders macake-monitor.service, a systemd user unit
// running `macake monitor`, the counterpart of the LaunchAgent.
func MonitorUnit(p service.Program) ([]byte, error) {
	exec, err := execStart(p, "monitor")
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("# macake monitor as a systemd user service, as `macake install-agent` installs it.\n")
	b.WriteString("# By hand: mkdir -p ~/.config/systemd/user\n")
	b.WriteString("#          macake install-agent --systemd-unit > ~/.config/systemd/user/" + MonitorUnitName + "\n")
	b.WriteString("#          systemctl --user daemon-reload && systemctl --user enable --now " + MonitorUnitName + "\n")
	b.WriteString("# Unprivileged ICMP needs your group inside net.ipv4.ping_group_range.\n")
	b.WriteString("[Unit]\n")
	b.WriteString("Description=macake: latency monitor, no shaping\n")
	b.WriteString("Documentation=" + docsite.Repo + "\n\n")
	serviceHead(&b, exec)
	b.WriteString("RestartPreventExitStatus=64 78\n\n")
	b.WriteString("[Install]\n")
	b.WriteString("WantedBy=default.target\n")
	return []byte(b.String()), nil
}

// execStart is the ExecStart= line's value of a unit running command of
// p, once p is valid.
func execStart(p service.Program, command string) (string, error) {
	if err := p.Validate(); err != nil {
		return "", err
	}
	return execLine(p.Args(command))
}

// serviceHead writes the [Service] section's first lines, which both
// units share: a simple service running exec, restarted on failure after
// service.ThrottleInterval seconds.
func serviceHead(b *strings.Builder, exec string) {
	b.WriteString("[Service]\n")
	b.WriteString("Type=simple\n")
	b.WriteString("ExecStart=" + exec + "\n")
	b.WriteString("Restart=on-failure\n")
	fmt.Fprintf(b, "RestartSec=%d\n", service.ThrottleInterval)
}

// execLine quotes argv for ExecStart= (systemd.service(5), "Command
// lines"): words with blanks, quotes or backslashes are double-quoted with
// C escapes; % and $ are doubled so systemd expands neither specifiers nor
// variables inside a path.
func execLine(argv []string) (string, error) {
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

// ProgramOfUnit reads what a systemd unit's ExecStart runs: the Program
// WatchUnit wrote into it.
func ProgramOfUnit(data []byte) (service.Program, error) {
	for _, line := range strings.Split(string(data), "\n") {
		if v, found := strings.CutPrefix(strings.TrimSpace(line), "ExecStart="); found {
			args, err := SplitExecStart(v)
			if err != nil {
				return service.Program{}, err
			}
			return service.ParseArgs(args)
		}
	}
	return service.Program{}, errors.New("no ExecStart= line")
}

// SplitExecStart splits a systemd ExecStart= value into words: spaces
// separate them, double-quoted words are Go-quoted (as WatchUnit
// writes them), and "%%" and "$$" stand for "%" and "$".
func SplitExecStart(s string) ([]string, error) {
	var words []string
	unescape := strings.NewReplacer("%%", "%", "$$", "$")
	for s = strings.TrimLeft(s, " \t"); s != ""; s = strings.TrimLeft(s, " \t") {
		var w string
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, fmt.Errorf("ExecStart: unterminated or malformed quoted word in %q", s)
			}
			if w, err = strconv.Unquote(q); err != nil {
				return nil, fmt.Errorf("ExecStart: %q: %v", q, err)
			}
			s = s[len(q):]
			if s != "" && s[0] != ' ' && s[0] != '\t' {
				return nil, fmt.Errorf("ExecStart: text right after a quoted word: %q", s)
			}
		} else {
			end := strings.IndexAny(s, " \t")
			if end < 0 {
				end = len(s)
			}
			w, s = s[:end], s[end:]
		}
		words = append(words, unescape.Replace(w))
	}
	return words, nil
}
