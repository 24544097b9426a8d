// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/execrun"
)

// ToolTimeout bounds each read-only command doctor runs; they answer in
// milliseconds.
const ToolTimeout = 10 * time.Second

// toolState is what one read-only run of a tool showed.
type toolState struct {
	name string
	argv []string
	// env is the variable that overrides the tool's path, "" for none.
	env string
	res execrun.Result
	// err is set when the tool could not be run to completion.
	err error
	// missing: the program does not exist or is not executable.
	missing bool
	// denied: it runs, but the kernel refused a non-root caller.
	denied bool
}

// runTool runs argv once through r and classifies the outcome.
func runTool(ctx context.Context, r execrun.Runner, name, env string, argv ...string) toolState {
	t := toolState{name: name, argv: argv, env: env}
	ctx, cancel := context.WithTimeout(ctx, ToolTimeout)
	defer cancel()
	t.res, t.err = r.Run(ctx, execrun.Command{Argv: argv})
	switch {
	case t.err != nil:
		t.missing = errors.Is(t.err, fs.ErrNotExist) || errors.Is(t.err, fs.ErrPermission)
	case t.res.ExitCode != 0 && deniedOutput(t.res.Stderr):
		t.denied = true
	}
	return t
}

// deniedOutput recognises a non-root caller refused by the kernel: pfctl
// cannot open /dev/pf ("Permission denied"), dnctl cannot open its raw
// socket ("Operation not permitted", exit 69), tc/ip get EPERM.
func deniedOutput(stderr []byte) bool {
	s := string(stderr)
	return strings.Contains(s, "Permission denied") || strings.Contains(s, "Operation not permitted")
}

// toolResult judges a tool: present and runnable, or what is wrong.
func toolResult(t toolState, install string) report.Result {
	path := t.argv[0]
	override := ""
	if t.env != "" {
		override = fmt.Sprintf("; %s overrides the path", t.env)
	}
	switch {
	case t.missing:
		return problem(install+override, "%s: %s: %v", t.name, path, unwrapExec(t.err))
	case t.err != nil:
		return problem(fmt.Sprintf("run `%s` by hand to see what is wrong", strings.Join(t.argv, " ")), "%s: %v", t.name, t.err)
	case t.denied:
		return ok("%s runs (reading the kernel's state needs root)", path)
	case t.res.ExitCode != 0:
		return problem(fmt.Sprintf("run `%s` by hand to see what is wrong", strings.Join(t.argv, " ")),
			"%s: `%s` failed: %v", t.name, strings.Join(t.argv, " "), &execrun.Error{Argv: t.argv, ExitCode: t.res.ExitCode, Stderr: t.res.Stderr})
	}
	return ok("%s runs", path)
}

// unwrapExec returns the innermost cause of a failed start ("no such file
// or directory"), without the argv that the line already names.
func unwrapExec(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
