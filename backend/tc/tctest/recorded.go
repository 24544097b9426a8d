// SPDX-License-Identifier: Apache-2.0

// Package tctest holds test helpers for code that drives the tc backend
// without a kernel: a runner that answers its reads from a recorded
// system (backend/tc/testdata/diff/*/live.txtar).
package tctest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/macake/macake/execrun"
)

// Recorded answers the tc backend's reads from a recorded system: one
// "-- argv --" section per command, the program named without its
// directory. Anything else fails, like a command that is not there.
type Recorded map[string]string

// ReadRecorded reads a live.txtar recording.
func ReadRecorded(path string) (Recorded, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the recorded system: %w", err)
	}
	r := Recorded{}
	var name string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --\n") {
			name = strings.TrimSuffix(strings.TrimPrefix(line, "-- "), " --\n")
			continue
		}
		r[name] += line
	}
	return r, nil
}

// Run answers a recorded command with its output.
func (r Recorded) Run(_ context.Context, cmd execrun.Command) (execrun.Result, error) {
	key := strings.Join(append([]string{filepath.Base(cmd.Argv[0])}, cmd.Argv[1:]...), " ")
	out, ok := r[key]
	if !ok {
		return execrun.Result{ExitCode: 1, Stderr: []byte("not recorded: " + key)}, nil
	}
	return execrun.Result{Stdout: []byte(out)}, nil
}

// Executing is Recorded that also accepts every command that changes the
// system (as a kernel that says yes), keeping them in Ran.
type Executing struct {
	Recorded
	Ran []string
}

// Run answers reads from the recording and records the rest.
func (r *Executing) Run(ctx context.Context, cmd execrun.Command) (execrun.Result, error) {
	if strings.Contains(strings.Join(cmd.Argv, " "), " show") {
		return r.Recorded.Run(ctx, cmd)
	}
	if n := len(cmd.Argv); n >= 2 && cmd.Argv[n-2] == "-batch" && cmd.Argv[n-1] == "-" {
		// One process for many commands: record each line as it ran.
		r.Ran = append(r.Ran, strings.Split(strings.TrimSuffix(cmd.Stdin, "\n"), "\n")...)
		return execrun.Result{}, nil
	}
	r.Ran = append(r.Ran, strings.Join(cmd.Argv[1:], " "))
	return execrun.Result{}, nil
}
