// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"os"

	"github.com/macake/macake/execrun"
)

// Tools names the programs the backend runs and, optionally, the network
// namespace they act in.
type Tools struct {
	// TC and IP are the iproute2 programs (MACAKE_TC, MACAKE_IP).
	TC, IP string
	// Unshare runs the capability probe in a throwaway network namespace
	// (MACAKE_UNSHARE).
	Unshare string
	// Netns, when set, makes every tc and ip command act in that named
	// network namespace (`tc -n NETNS`, `ip -n NETNS`); empty means the
	// caller's namespace. Tests use it to shape veths in their own
	// namespaces; the probe ignores it.
	Netns string
}

// DefaultTools returns ToolsFromEnv of the process's environment.
func DefaultTools() Tools { return ToolsFromEnv(os.Getenv) }

// ToolsFromEnv returns the tools getenv names (MACAKE_TC, MACAKE_IP,
// MACAKE_UNSHARE), else the first of the usual sbin paths that exists,
// else the bare name looked up on PATH.
func ToolsFromEnv(getenv func(string) string) Tools {
	return Tools{
		TC:      toolPath(getenv(EnvTC), "tc"),
		IP:      toolPath(getenv(EnvIP), "ip"),
		Unshare: toolPath(getenv(EnvUnshare), "unshare"),
	}
}

// toolPath is set when the environment gave one, else where name is found.
func toolPath(set, name string) string {
	if set != "" {
		return set
	}
	for _, dir := range []string{"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"} {
		if fi, err := os.Stat(dir + name); err == nil && !fi.IsDir() {
			return dir + name
		}
	}
	return name
}

func (t Tools) tcCmd(args ...string) execrun.Command {
	argv := []string{t.TC}
	if t.Netns != "" {
		argv = append(argv, "-n", t.Netns)
	}
	return execrun.Command{Argv: append(argv, args...)}
}

func (t Tools) ipCmd(args ...string) execrun.Command {
	argv := []string{t.IP}
	if t.Netns != "" {
		argv = append(argv, "-n", t.Netns)
	}
	return execrun.Command{Argv: append(argv, args...)}
}
