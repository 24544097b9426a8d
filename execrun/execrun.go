// SPDX-License-Identifier: Apache-2.0

// Package execrun runs child processes for the backends (pfctl, dnctl, tc,
// launchctl): with LC_ALL=C, a timeout, and errors that carry the argv, the
// exit status and the child's stderr. It is the only package that imports
// os/exec; TestOnlyExecrunImportsOsExec enforces that.
package execrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// DefaultTimeout bounds one child process. pfctl and dnctl answer in
// milliseconds; a child that takes this long is hung.
const DefaultTimeout = 10 * time.Second

// Command is one child process invocation, exact to the byte.
type Command struct {
	// Argv is the program and its arguments; Argv[0] is the tool's path.
	Argv []string `json:"argv"`
	// Stdin is fed to the child (e.g. the anchor's rules for pfctl -f -).
	Stdin string `json:"stdin,omitempty"`
}

// Result is what a child process produced. A non-zero ExitCode is not an
// error by itself: the caller decides (dnctl's "already gone" exit 1 is
// benign, pfctl's show commands exit 0 on error).
type Result struct {
	Stdout, Stderr []byte
	ExitCode       int
}

// Runner runs one command. It returns an error only when the command could
// not be run to completion (not found, timed out, killed); exit statuses are
// in the Result. Implementations: Exec (real processes) and the pf/dummynet
// emulator (in-process).
type Runner interface {
	Run(ctx context.Context, cmd Command) (Result, error)
}

// Exec runs commands as real child processes. The zero value is ready to
// use with DefaultTimeout.
type Exec struct {
	// Timeout bounds each command; 0 means DefaultTimeout.
	Timeout time.Duration
	// Env is added to the child's environment after LC_ALL=C.
	Env []string
}

// Run implements execrun.Runner.
func (r Exec) Run(ctx context.Context, cmd Command) (Result, error) {
	if len(cmd.Argv) == 0 {
		return Result{}, errors.New("execrun: empty command")
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Argv[0], cmd.Argv[1:]...)
	c.Env = append(append(os.Environ(), "LC_ALL=C"), r.Env...)
	c.WaitDelay = time.Second
	if cmd.Stdin != "" {
		c.Stdin = strings.NewReader(cmd.Stdin)
	}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return res, &Error{Argv: cmd.Argv, ExitCode: -1, Stderr: res.Stderr, Err: fmt.Errorf("timed out after %v: %w", timeout, ctx.Err())}
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && ee.Exited() {
		res.ExitCode = ee.ExitCode()
		return res, nil
	}
	return res, &Error{Argv: cmd.Argv, ExitCode: -1, Stderr: res.Stderr, Err: err}
}

// Error is a failed child process: which argv, how it ended, and what it
// said on stderr.
type Error struct {
	Argv     []string
	ExitCode int // -1 when the process did not exit normally
	Stderr   []byte
	Err      error // underlying cause, may be nil for a plain non-zero exit
}

// Error returns e.g. `running "dnctl pipe 48001 config …": exit status 65: dnctl: bandwidth too large`.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "running %q", strings.Join(e.Argv, " "))
	switch {
	case e.Err != nil:
		fmt.Fprintf(&b, ": %v", e.Err)
	default:
		fmt.Fprintf(&b, ": exit status %d", e.ExitCode)
	}
	if s := strings.TrimSpace(string(e.Stderr)); s != "" {
		fmt.Fprintf(&b, ": %s", s)
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Check turns a non-zero exit into an *Error, so callers that treat every
// non-zero exit as failure can write `res, err = execrun.Check(cmd, r.Run(ctx, cmd))`.
func Check(cmd Command, res Result, err error) (Result, error) {
	if err != nil {
		return res, err
	}
	if res.ExitCode != 0 {
		return res, &Error{Argv: cmd.Argv, ExitCode: res.ExitCode, Stderr: res.Stderr}
	}
	return res, nil
}

// String returns the command as a shell-like line.
func (c Command) String() string {
	parts := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		parts[i] = shellQuote(a)
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
