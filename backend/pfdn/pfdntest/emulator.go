// SPDX-License-Identifier: Apache-2.0

// Package pfdntest is the Mac for macake's tests: a stateful emulator of
// macOS's pfctl and dnctl that answers with the exact bytes, stderr lines,
// exit codes and error strings recorded in the pf/dummynet reference, and
// reproduces their traps (decimals truncated, octal numbers, full-replacement
// config, bare `delete N` deleting a queue, hash-ordered listings, anchors
// vanishing when emptied, missing pipes blackholing traffic).
//
// It is usable in-process, as a execrun.Runner, and as two binaries
// (./cmd/pfctl and ./cmd/dnctl) that share their state through the file
// named by PFDN_EMU_STATE, so the real macake binary can run end to end on
// Linux with MACAKE_PFCTL and MACAKE_DNCTL pointing at them.
//
// Faults are injected on demand (fail, hang or garbage on the Nth matching
// call), and foreign actors can change the Mac behind macake's back (disable
// pf, drop the hook line, delete the anchor or a pipe, reboot).
package pfdntest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/macake/macake/execrun"
)

// Emulator is one emulated Mac. Its methods are safe for concurrent use.
type Emulator struct {
	mu       sync.Mutex
	m        *Machine
	faults   []*faultState
	calls    []Call
	clock    func() time.Time
	readFile func(string) ([]byte, error)
}

// New returns an emulated Mac just after boot: pf disabled, the stock main
// ruleset with its `dummynet-anchor "com.apple/*"` hook, no pipes.
func New() *Emulator {
	return &Emulator{m: NewMachine(), clock: time.Now}
}

// Call is one recorded invocation.
type Call struct {
	Argv     []string       `json:"argv"`
	Stdin    string         `json:"stdin,omitempty"`
	Result   execrun.Result `json:"result"`
	Mutating bool           `json:"mutating,omitempty"`
	// Fault names the injected fault that shaped the answer, if any.
	Fault string `json:"fault,omitempty"`
}

// Run implements execrun.Runner: it runs one pfctl or dnctl invocation against
// the emulated Mac. Injected faults apply. A hung call returns when ctx is
// done, with an *execrun.Error as a real timeout would.
func (e *Emulator) Run(ctx context.Context, cmd execrun.Command) (execrun.Result, error) {
	e.mu.Lock()
	res, hang, err := e.runLocked(cmd, e.m.NextPID, nil, false)
	e.m.NextPID++
	e.mu.Unlock()
	if hang > 0 {
		<-ctx.Done()
		return execrun.Result{ExitCode: -1}, &execrun.Error{Argv: cmd.Argv, ExitCode: -1, Err: fmt.Errorf("timed out: %w", ctx.Err())}
	}
	return res, err
}

// runLocked runs cmd with faults and records it; e.mu must be held. A
// hung call returns how long a binary should hang (Fault.HangFor, default
// an hour) and no result.
func (e *Emulator) runLocked(cmd execrun.Command, pid int, stdin func() []byte, tty bool) (res execrun.Result, hang time.Duration, err error) {
	call := Call{Argv: append([]string(nil), cmd.Argv...), Stdin: cmd.Stdin, Mutating: IsMutating(cmd.Argv)}
	defer func() {
		call.Result = res
		e.calls = append(e.calls, call)
	}()
	if len(cmd.Argv) == 0 {
		return execrun.Result{}, 0, &execrun.Error{Argv: cmd.Argv, ExitCode: -1, Err: fmt.Errorf("empty command")}
	}
	f := e.matchFault(cmd.Argv, call.Mutating)
	if f != nil {
		call.Fault = f.Kind.String()
		switch f.Kind {
		case Hang:
			hang = f.HangFor
			if hang <= 0 {
				hang = time.Hour
			}
			return execrun.Result{ExitCode: -1}, hang, nil
		case Fail:
			if f.AfterEffect {
				// The command did its work and printed its output, then
				// failed anyway (e.g. killed on its way out).
				r, err := e.exec(cmd, pid, stdin, tty)
				r.ExitCode = f.exitCode()
				r.Stderr = append(r.Stderr, f.stderr(cmd.Argv)...)
				return r, 0, err
			}
			return execrun.Result{ExitCode: f.exitCode(), Stderr: []byte(f.stderr(cmd.Argv))}, 0, nil
		case Garbage:
			r, err := e.exec(cmd, pid, stdin, tty)
			r.Stdout = []byte(garbage)
			return r, 0, err
		case Rewrite:
			r, err := e.exec(cmd, pid, stdin, tty)
			if f.Stream == "stderr" {
				r.Stderr = f.rewrite.ReplaceAll(r.Stderr, []byte(f.Replace))
			} else {
				r.Stdout = f.rewrite.ReplaceAll(r.Stdout, []byte(f.Replace))
			}
			return r, 0, err
		case Kill:
			e.exec(cmd, pid, stdin, tty)
			return execrun.Result{ExitCode: -1}, 0, &execrun.Error{Argv: cmd.Argv, ExitCode: -1, Err: errors.New("killed with the caller (pfdntest)")}
		}
	}
	res, err = e.exec(cmd, pid, stdin, tty)
	if err == errHung {
		// A line of a file hung dnctl, after the lines before it; such a
		// hang has no HangFor of its own.
		return res, time.Hour, nil
	}
	return res, 0, err
}

// errHung is how exec says an injected fault hung the process midway.
var errHung = errors.New("pfdntest: hung")

// garbage is what a "print garbage" fault puts on stdout.
const garbage = "\x1b[31m#%!garbage: 0xDEADBEEF \x00\x01\x02\nmacake? pipe?? (truncated\n"

// exec runs one invocation without faults.
func (e *Emulator) exec(cmd execrun.Command, pid int, stdin func() []byte, tty bool) (execrun.Result, error) {
	tool := toolOf(cmd.Argv[0])
	if tool == "" || e.m.MissingTools {
		return execrun.Result{ExitCode: -1}, &execrun.Error{Argv: cmd.Argv, ExitCode: -1,
			Err: &fs.PathError{Op: "fork/exec", Path: cmd.Argv[0], Err: syscall.ENOENT}}
	}
	if stdin == nil {
		in := []byte(cmd.Stdin)
		stdin = func() []byte { return in }
	}
	p := &process{m: e.m, argv: cmd.Argv, stdin: stdin, tty: tty, pid: pid, now: e.clock(), readFile: e.readFile,
		lineFault: e.matchLineFault}
	var code int
	if tool == "pfctl" {
		code = runPfctl(p)
	} else {
		code = runDnctl(p)
	}
	if p.crashed {
		return execrun.Result{ExitCode: -1}, &execrun.Error{Argv: cmd.Argv, ExitCode: -1, Err: fmt.Errorf("signal: segmentation fault")}
	}
	if p.hung {
		return execrun.Result{ExitCode: -1}, errHung
	}
	return execrun.Result{Stdout: p.stdout.Bytes(), Stderr: p.stderr.Bytes(), ExitCode: code}, nil
}

// toolOf maps a program path to "pfctl" or "dnctl".
func toolOf(path string) string {
	base := filepath.Base(path)
	switch {
	case strings.Contains(base, "pfctl"):
		return "pfctl"
	case strings.Contains(base, "dnctl"):
		return "dnctl"
	}
	return ""
}

// IsMutating reports whether an invocation asks to change pf or dummynet
// state (whether or not it succeeds): a load, flush, enable, disable or
// release for pfctl; config, delete, flush or file mode for dnctl. Shows,
// lists and -n checks are reads.
func IsMutating(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	args := argv[1:]
	switch toolOf(argv[0]) {
	case "pfctl":
		noAction, mutating := false, false
		for i := 0; i < len(args); i++ {
			a := args[i]
			if len(a) < 2 || a[0] != '-' {
				continue
			}
			for j := 1; j < len(a); j++ {
				c := a[j]
				if c == 'n' {
					noAction = true
				}
				if strings.IndexByte("fFeEdXzkKTx", c) >= 0 {
					mutating = true
				}
				if strings.IndexByte(pfctlArgOpts, c) >= 0 {
					if j == len(a)-1 {
						i++
					}
					break
				}
			}
		}
		return mutating && !noAction
	case "dnctl":
		if len(args) > 0 && strings.HasPrefix(args[len(args)-1], "/") {
			return true
		}
		words := args
		if len(args) == 1 {
			words = splitSingle(args[0])
		}
		for _, w := range words {
			if strings.HasPrefix(w, "-") {
				if strings.Contains(w, "n") {
					return false
				}
				continue
			}
			if isDigit(w) || w == "" || strings.HasPrefix("pipe", w) || strings.HasPrefix("queue", w) {
				continue
			}
			return !(strings.HasPrefix("list", w) || strings.HasPrefix("print", w) || strings.HasPrefix("show", w))
		}
	}
	return false
}

// Calls returns every invocation so far, in order.
func (e *Emulator) Calls() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Call(nil), e.calls...)
}

// MutatingCalls returns the invocations that asked to change state.
func (e *Emulator) MutatingCalls() []Call {
	var out []Call
	for _, c := range e.Calls() {
		if c.Mutating {
			out = append(out, c)
		}
	}
	return out
}

// ResetCalls forgets the recorded invocations.
func (e *Emulator) ResetCalls() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = nil
}

// --- settings ---

// SetALTQLines switches pfctl's two ALTQ stderr lines on (the default) or off.
func (e *Emulator) SetALTQLines(on bool) { e.with(func(m *Machine) { m.NoALTQLines = !on }) }

// SetPrivileged makes the caller root (the default) or not: without root,
// pfctl cannot open /dev/pf and dnctl cannot open its socket.
func (e *Emulator) SetPrivileged(root bool) { e.with(func(m *Machine) { m.Unprivileged = !root }) }

// SetToolsMissing makes pfctl and dnctl "not installed".
func (e *Emulator) SetToolsMissing(missing bool) {
	e.with(func(m *Machine) { m.MissingTools = missing })
}

// SetClock replaces the clock (pf's uptime, token ages).
func (e *Emulator) SetClock(now func() time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.clock = now
}

// SetReadFile replaces how files named on the command line are read
// (/etc/pf.conf and the com.apple anchor file are always emulated).
func (e *Emulator) SetReadFile(read func(string) ([]byte, error)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.readFile = read
}

// SetFile replaces an emulated file, e.g. "/etc/pf.conf".
func (e *Emulator) SetFile(path, content string) {
	e.with(func(m *Machine) { m.Files[path] = content })
}

func (e *Emulator) with(f func(m *Machine)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e.m)
}

// Machine returns a deep copy of the emulated state.
func (e *Emulator) Machine() *Machine {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.m.clone()
}

func (m *Machine) clone() *Machine {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // plain data always marshals
	}
	var c Machine
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}

// --- foreign actors: changes behind macake's back ---

// Foreign runs a command as another tool would, without faults and
// without recording it, e.g. Foreign(ctx, "", "pfctl", "-d").
func (e *Emulator) Foreign(ctx context.Context, stdin string, argv ...string) (execrun.Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	pid := 90000 + len(e.m.PF.Tokens)
	return e.exec(execrun.Command{Argv: argv, Stdin: stdin}, pid, nil, false)
}

// TakeReference makes a daemon (pid, process name) take a pf enable
// reference, as services do with DIOCSTARTREF; it returns the token.
func (e *Emulator) TakeReference(pid int, process string) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.m.startRef(pid, process, e.clock())
}

// DisablePF is another tool's `pfctl -d`: pf off and every reference,
// macake's included, invalidated.
func (e *Emulator) DisablePF() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m.stop(e.clock().Unix())
}

// DropHook removes `dummynet-anchor "com.apple/*"` from the main ruleset,
// as when another tool loads its own main ruleset.
func (e *Emulator) DropHook() {
	e.with(func(m *Machine) {
		main := m.Rulesets[""]
		var keep []Rule
		for _, r := range main.Rules[TypeDummynet] {
			if r.Action != "dummynet-anchor" {
				keep = append(keep, r)
			}
		}
		main.Rules[TypeDummynet] = keep
		m.cleanup()
	})
}

// DeleteAnchor flushes every rule of an anchor (`pfctl -a PATH -F all`);
// pf then deletes it.
func (e *Emulator) DeleteAnchor(path string) {
	e.with(func(m *Machine) {
		if m.Rulesets[path] != nil {
			m.commit(path, ruleTypes, nil, nil, false)
		}
	})
}

// DeletePipe deletes pipe n (`dnctl pipe delete n`); it reports whether the
// pipe existed.
func (e *Emulator) DeletePipe(n int) bool {
	var ok bool
	e.with(func(m *Machine) { ok = m.deletePipe(int32(n)) == "" })
	return ok
}

// FlushDummynet is another tool's `dnctl -q flush`.
func (e *Emulator) FlushDummynet() { e.with(func(m *Machine) { m.flushDummynet() }) }

// Reboot clears pipes, queues, anchors, tokens and the enabled flag, and
// loads the stock main ruleset again (reference §5.6).
func (e *Emulator) Reboot() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m.boot(e.clock().Unix())
}

// --- snapshots ---

// Snapshot is the comparable part of the emulated state: what a test
// checks to say "exactly as before". Counters, flow contents, token values
// and times are left out; references are identified by holder.
type Snapshot struct {
	PFEnabled bool
	RefCount  uint64
	// References lists holders as "PID PROCESS", oldest first.
	References []string
	// Rulesets maps an anchor path ("" for the main ruleset) to its
	// options and rules, printed type by type.
	Rulesets map[string]string
	// Pipes and Queues map numbers to their configuration line.
	Pipes  map[int]string
	Queues map[int]string
}

// Snapshot returns the comparable state.
func (e *Emulator) Snapshot() Snapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.m
	s := Snapshot{PFEnabled: m.PF.Enabled, RefCount: m.PF.RefCount, Rulesets: map[string]string{}, Pipes: map[int]string{}, Queues: map[int]string{}}
	for _, t := range m.PF.Tokens {
		s.References = append(s.References, fmt.Sprintf("%d %s", t.PID, t.Process))
	}
	for path, rs := range m.Rulesets {
		var b strings.Builder
		for _, o := range rs.Options {
			b.WriteString("option " + o + "\n")
		}
		for _, t := range ruleTypes {
			for _, r := range rs.Rules[t] {
				fmt.Fprintf(&b, "%s: %s\n", t, r)
			}
		}
		s.Rulesets[path] = b.String()
	}
	for _, p := range m.Dummynet.Pipes {
		c := *p
		c.FS.Flows = nil
		s.Pipes[int(p.Number)] = pipeLine(&c)
	}
	for _, q := range m.Dummynet.Queues {
		fs := q.FS
		fs.Flows = nil
		s.Queues[int(q.Number)] = flowsetLine(fmt.Sprintf("q%05d: weight %d pipe %d ", q.Number, q.Weight, q.Parent), &fs)
	}
	return s
}

// String renders the snapshot deterministically, for comparisons and
// readable test failures.
func (s Snapshot) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pf enabled: %v, references: %d %v\n", s.PFEnabled, s.RefCount, s.References)
	for _, path := range slices.Sorted(maps.Keys(s.Rulesets)) {
		name := path
		if name == "" {
			name = "(main)"
		}
		fmt.Fprintf(&b, "ruleset %s:\n%s", name, indent(s.Rulesets[path]))
	}
	for _, kind := range []struct {
		name string
		m    map[int]string
	}{{"pipe", s.Pipes}, {"queue", s.Queues}} {
		keys := make([]int, 0, len(kind.m))
		for k := range kind.m {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s %d: %s\n", kind.name, k, kind.m[k])
		}
	}
	return b.String()
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

// --- faults ---

// FaultKind is what an injected fault does.
type FaultKind int

// The fault kinds.
const (
	// Fail answers with a non-zero exit and an error on stderr, without
	// (or, with AfterEffect, after) carrying the command out.
	Fail FaultKind = iota
	// Hang never answers: in-process until the context is done, as a
	// binary until killed.
	Hang
	// Garbage carries the command out but prints garbage on stdout.
	Garbage
	// Kill carries the command out, then the caller never sees its
	// answer: an error with no output, as when macake is killed while the
	// command runs. A crash test then starts a new Backend on the same
	// token store, as the next macake would on the same state file.
	Kill
	// Rewrite carries the command out and rewrites its output: every
	// match of Find in Stream becomes Replace. It plays a Mac whose tools
	// print what the emulator does not expect (another rounding, a
	// missing line), the differences `macake selftest` must catch.
	Rewrite
)

// String names the kind.
func (k FaultKind) String() string {
	switch k {
	case Fail:
		return "fail"
	case Hang:
		return "hang"
	case Garbage:
		return "garbage"
	case Kill:
		return "kill"
	case Rewrite:
		return "rewrite"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Fault selects calls and spoils them.
type Fault struct {
	// Match is a regular expression matched against the call as text:
	// the tool's base name and its arguments joined by spaces, e.g.
	// "dnctl pipe 48001 config bw 500000Kbit/s queue 256Kbytes". Empty
	// matches every call.
	Match string `json:"match,omitempty"`
	// MutatingOnly restricts the fault to calls that change state.
	MutatingOnly bool `json:"mutating_only,omitempty"`
	// Nth picks the Nth selected call (1-based); 0 spoils every one.
	Nth  int       `json:"nth,omitempty"`
	Kind FaultKind `json:"kind"`
	// AfterEffect makes Fail carry the command out, with its output,
	// before failing (the kernel changed state, the exit status says no).
	AfterEffect bool `json:"after_effect,omitempty"`
	// ExitCode and Stderr shape a Fail (defaults: 1 and an injected-fault
	// message).
	ExitCode int    `json:"exit_code,omitempty"`
	Stderr   string `json:"stderr,omitempty"`
	// Find, Replace and Stream ("stdout", the default, or "stderr")
	// shape a Rewrite: Find is a regular expression, Replace may use its
	// groups ($1).
	Find    string `json:"find,omitempty"`
	Replace string `json:"replace,omitempty"`
	Stream  string `json:"stream,omitempty"`
	// HangFor is how long a hung emulator binary sleeps before it exits
	// without answering (default an hour): a test that kills macake
	// leaves no long-lived orphan behind. In-process, a hang lasts until
	// the context is done.
	HangFor time.Duration `json:"hang_for,omitempty"`
}

type faultState struct {
	Fault
	re      *regexp.Regexp
	rewrite *regexp.Regexp
	Seen    int `json:"seen"`
}

func (f *faultState) exitCode() int {
	if f.ExitCode != 0 {
		return f.ExitCode
	}
	return 1
}

func (f *faultState) stderr(argv []string) string {
	if f.Stderr != "" {
		return f.Stderr
	}
	return fmt.Sprintf("%s: injected failure (pfdntest)\n", toolOf(argv[0]))
}

// AddFault installs a fault; it fails when Match is not a valid regexp.
func (e *Emulator) AddFault(f Fault) error {
	fs, err := newFaultState(f)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, fs)
	return nil
}

func newFaultState(f Fault) (*faultState, error) {
	fs := &faultState{Fault: f}
	if f.Match != "" {
		re, err := regexp.Compile(f.Match)
		if err != nil {
			return nil, fmt.Errorf("fault pattern %q: %w", f.Match, err)
		}
		fs.re = re
	}
	if f.Kind == Rewrite {
		re, err := regexp.Compile(f.Find)
		if err != nil || f.Find == "" {
			return nil, fmt.Errorf("rewrite fault: Find %q must be a non-empty regular expression (%v)", f.Find, err)
		}
		if f.Stream != "" && f.Stream != "stdout" && f.Stream != "stderr" {
			return nil, fmt.Errorf("rewrite fault: Stream %q must be stdout or stderr", f.Stream)
		}
		fs.rewrite = re
	}
	return fs, nil
}

// matchLineFault counts a line of dnctl's file mode, as the call text it
// stands for, against the faults with a Match (a fault that matches
// every call matches the file's call, not each line) and returns the
// first that fires. e.mu is held (exec runs under it).
func (e *Emulator) matchLineFault(text string) *faultState {
	var fired *faultState
	for _, f := range e.faults {
		if f.re == nil || !f.re.MatchString(text) {
			continue
		}
		f.Seen++
		if fired == nil && (f.Nth == 0 || f.Seen == f.Nth) {
			fired = f
		}
	}
	return fired
}

// ClearFaults removes every fault.
func (e *Emulator) ClearFaults() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = nil
}

// matchFault counts the call against every fault and returns the first
// that fires.
func (e *Emulator) matchFault(argv []string, mutating bool) *faultState {
	text := strings.Join(append([]string{toolOf(argv[0])}, argv[1:]...), " ")
	var fired *faultState
	for _, f := range e.faults {
		if f.MutatingOnly && !mutating {
			continue
		}
		if f.re != nil && !f.re.MatchString(text) {
			continue
		}
		f.Seen++
		if fired == nil && (f.Nth == 0 || f.Seen == f.Nth) {
			fired = f
		}
	}
	return fired
}
