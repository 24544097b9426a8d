// SPDX-License-Identifier: Apache-2.0

package launchd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ProgramOfPlist reads what an installed LaunchDaemon plist runs: the
// Program DaemonJob wrote into it, for a doctor that checks it.
func ProgramOfPlist(data []byte) (Program, error) {
	v, err := Decode(data)
	if err != nil {
		return Program{}, err
	}
	d, isDict := v.(Dict)
	if !isDict {
		return Program{}, errors.New("the plist's root is not a dictionary")
	}
	arr, isArr := d.Get("ProgramArguments").(Array)
	if !isArr {
		return Program{}, errors.New("no ProgramArguments array")
	}
	args := make([]string, len(arr))
	for i, a := range arr {
		s, isStr := a.(String)
		if !isStr {
			return Program{}, fmt.Errorf("ProgramArguments[%d] is not a string", i)
		}
		args[i] = string(s)
	}
	return programOfArgs(args)
}

// programOfArgs recognises the argv install-daemon writes:
// BINARY --config-dir DIR --state-dir DIR watch, followed in the
// LaunchDaemon by --log-file PATH (DaemonArgs).
func programOfArgs(args []string) (Program, error) {
	if len(args) == 8 && args[6] == "--log-file" {
		args = args[:6]
	}
	if len(args) != 6 || args[1] != "--config-dir" || args[3] != "--state-dir" || args[5] != "watch" {
		return Program{}, fmt.Errorf("it runs %q, not `macake --config-dir DIR --state-dir DIR watch`", strings.Join(args, " "))
	}
	return Program{Binary: args[0], ConfigDir: args[2], StateDir: args[4]}, nil
}

// ProgramOfUnit reads what a systemd unit's ExecStart runs: the Program
// SystemdWatchUnit wrote into it.
func ProgramOfUnit(data []byte) (Program, error) {
	for _, line := range strings.Split(string(data), "\n") {
		if v, found := strings.CutPrefix(strings.TrimSpace(line), "ExecStart="); found {
			args, err := SplitExecStart(v)
			if err != nil {
				return Program{}, err
			}
			return programOfArgs(args)
		}
	}
	return Program{}, errors.New("no ExecStart= line")
}

// SplitExecStart splits a systemd ExecStart= value into words: spaces
// separate them, double-quoted words are Go-quoted (as launchd's unit
// renderer writes them), and "%%" and "$$" stand for "%" and "$".
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
