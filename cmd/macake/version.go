// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/macake/macake/cmd/macake/internal/exitcode"
)

var versionCmd = &command{
	name:  "version",
	args:  "[--json]",
	short: "Print the version, commit and Go version.",
	long: `Prints the version macake was built as (or the module version go install
recorded), its commit, the Go version and the platform; --json prints them
as one object.

Exit status: 0; 64 usage.`,
}

func init() { versionCmd.run = runVersion }

func runVersion(e *env, args []string) int {
	fs := versionCmd.flags()
	asJSON := fs.Bool("json", false, "print as JSON")
	if done, code := versionCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	v, c := version, commit
	if v == "dev" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	if *asJSON {
		out, _ := json.Marshal(map[string]string{
			"version": v, "commit": c, "go_version": runtime.Version(),
			"os": runtime.GOOS, "arch": runtime.GOARCH,
		})
		fmt.Fprintln(e.stdout, string(out))
		return exitcode.OK
	}
	fmt.Fprintf(e.stdout, "macake %s (commit %s, %s, %s/%s)\n", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitcode.OK
}
