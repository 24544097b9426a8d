// SPDX-License-Identifier: Apache-2.0

package config

import "strings"

// DefaultConfigDir is where the policy files are unless --config-dir
// says otherwise.
const DefaultConfigDir = "/etc/macake/links.d"

// Invocation is how the person runs macake: the --config-dir and
// --state-dir they gave, "" for each left at its default. Every command a
// message tells them to run repeats them (Command); without them it would
// act on /etc/macake and the default state directory instead.
type Invocation struct {
	ConfigDir, StateDir string
}

// Command renders the command line of a hint: "macake", the directories
// of i, then args (e.g. "measure", "--link", "home"); "sudo " in front
// when it needs root. A word the shell would split or expand is quoted.
func (i Invocation) Command(asRoot bool, args ...string) string {
	words := []string{"macake"}
	if asRoot {
		words = append([]string{"sudo"}, words...)
	}
	if i.ConfigDir != "" {
		words = append(words, "--config-dir", shellWord(i.ConfigDir))
	}
	if i.StateDir != "" {
		words = append(words, "--state-dir", shellWord(i.StateDir))
	}
	for _, a := range args {
		words = append(words, shellWord(a))
	}
	return strings.Join(words, " ")
}

// shellWord quotes w for a POSIX shell when it holds anything but the
// characters a path or a flag is usually made of.
func shellWord(w string) string {
	if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:,=@+%") == "" {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
