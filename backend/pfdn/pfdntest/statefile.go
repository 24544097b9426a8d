// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/safefile"
)

// EnvState names the file the emulator binaries keep the emulated Mac in.
// A missing file is a Mac just after boot.
const EnvState = "PFDN_EMU_STATE"

// maxFileCalls bounds the call log kept in a state file.
const maxFileCalls = 10000

// fileState is the state file's content.
type fileState struct {
	Machine *Machine      `json:"machine"`
	Faults  []*faultState `json:"faults,omitempty"`
	Calls   []Call        `json:"calls,omitempty"`
}

// LoadFile reads an emulator from a state file (a fresh Mac when the file
// does not exist), with its faults and call log.
func LoadFile(path string) (*Emulator, error) {
	e := New()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return e, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading emulator state: %w", err)
	}
	var st fileState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("emulator state %s is corrupt: %w", path, err)
	}
	if st.Machine == nil {
		return nil, fmt.Errorf("emulator state %s holds no machine", path)
	}
	e.m = st.Machine
	if e.m.Rulesets == nil || e.m.Rulesets[""] == nil {
		return nil, fmt.Errorf("emulator state %s has no main ruleset", path)
	}
	for _, f := range st.Faults {
		fs, err := newFaultState(f.Fault)
		if err != nil {
			return nil, err
		}
		fs.Seen = f.Seen
		e.faults = append(e.faults, fs)
	}
	e.calls = st.Calls
	return e, nil
}

// SaveFile writes the emulator (machine, faults, call log) to path
// atomically.
func (e *Emulator) SaveFile(path string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	calls := e.calls
	if len(calls) > maxFileCalls {
		calls = calls[len(calls)-maxFileCalls:]
	}
	b, err := json.Marshal(fileState{Machine: e.m, Faults: e.faults, Calls: calls})
	if err != nil {
		return err
	}
	return safefile.WriteAtomic(path, b, 0o644)
}

// UpdateFile applies f to the emulator stored at path under the file lock,
// for tests that prepare or inspect the state the binaries share.
func UpdateFile(path string, f func(e *Emulator) error) error {
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	e, err := LoadFile(path)
	if err != nil {
		return err
	}
	if err := f(e); err != nil {
		return err
	}
	return e.SaveFile(path)
}

// geteuid is the caller's effective uid (tests replace it).
var geteuid = os.Geteuid

// Main is the body of the emulator binaries: it runs args (args[0] names
// the tool, pfctl or dnctl) against the state file named by
// PFDN_EMU_STATE, under an exclusive lock, and returns the exit code. As
// on a Mac, a caller who is not root may not open /dev/pf or dnctl's
// socket (reference/pf-dummynet.md items 12 and 30), whatever the state
// file says. Such a caller changes nothing, so it only reads the state
// file (written atomically, it needs no lock to be read) and writes
// neither it nor the lock: a user's dry run works beside a root-owned
// state file, as on a Mac, and its refused calls are not in the call log.
func Main(args []string, stdin *os.File, stdout, stderr io.Writer, getenv func(string) string) int {
	path := getenv(EnvState)
	if path == "" {
		fmt.Fprintf(stderr, "%s: this is the pfdntest emulator; set %s to its state file\n", toolOf(args[0]), EnvState)
		return 70
	}
	if geteuid() != 0 {
		return userMain(path, args, stdout, stderr)
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		fmt.Fprintf(stderr, "pfdntest: %v\n", err)
		return 70
	}
	e, err := LoadFile(path)
	if err != nil {
		unlock()
		fmt.Fprintf(stderr, "pfdntest: %v\n", err)
		return 70
	}
	var in []byte
	read := false
	readStdin := func() []byte {
		if !read && stdin != nil {
			in, _ = io.ReadAll(stdin)
			read = true
		}
		return in
	}
	tty := stdin != nil && isTerminal(int(stdin.Fd()))
	res, hang, runErr := e.runLocked(execrun.Command{Argv: args}, os.Getpid(), readStdin, tty)
	if read && len(e.calls) > 0 {
		e.calls[len(e.calls)-1].Stdin = string(in)
	}
	saveErr := e.SaveFile(path)
	unlock()
	if saveErr != nil {
		fmt.Fprintf(stderr, "pfdntest: saving state: %v\n", saveErr)
		return 70
	}
	return finish(args, res, hang, runErr, stdout, stderr)
}

// userMain runs args for a caller who is not root, whom the tools refuse:
// against the state as it is, saving nothing.
func userMain(path string, args []string, stdout, stderr io.Writer) int {
	e, err := LoadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "pfdntest: %v\n", err)
		return 70
	}
	e.m.Unprivileged = true
	res, hang, runErr := e.runLocked(execrun.Command{Argv: args}, os.Getpid(), func() []byte { return nil }, false)
	return finish(args, res, hang, runErr, stdout, stderr)
}

// finish turns a run's outcome into the binary's output and exit code.
func finish(args []string, res execrun.Result, hang time.Duration, runErr error, stdout, stderr io.Writer) int {
	if hang > 0 {
		// Hang until killed, as a stuck pfctl would; the lock is free.
		time.Sleep(hang)
		return 1
	}
	if runErr != nil {
		if errors.Is(runErr, syscall.ENOENT) {
			fmt.Fprintf(stderr, "pfdntest: %s is \"not installed\" in this emulated Mac\n", args[0])
			return 127
		}
		// dnctl -s: the real tool dies of SIGSEGV with no output. A Go
		// program cannot die of a raised SIGSEGV (the runtime catches it),
		// so the binary exits 139, as a shell reports that death.
		return 139
	}
	stdout.Write(res.Stdout)
	stderr.Write(res.Stderr)
	return res.ExitCode
}
