// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"bytes"
	"fmt"
	"os"
	"time"
)

// process is one emulated run of pfctl or dnctl against a Machine: its
// arguments, its streams and how it exits.
type process struct {
	m        *Machine
	argv     []string // argv[0] is the program as invoked
	stdin    func() []byte
	tty      bool
	pid      int
	now      time.Time
	readFile func(string) ([]byte, error)
	// lineFault spoils a line of dnctl's file mode, given as the call it
	// stands for ("dnctl pipe 48001 config …"); nil when none fires.
	lineFault func(text string) *faultState

	stdout, stderr bytes.Buffer
	progname       string
	// crashed is set when the real tool would die from a signal.
	crashed bool
	// hung is set when an injected fault hangs the process.
	hung bool
}

// exit unwinds a process the way exit(3) would.
type exit int

// run calls body and turns an exit panic into the exit code.
func (p *process) run(body func() int) (code int) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exit)
			if !ok {
				panic(r)
			}
			code = int(e)
		}
	}()
	return body()
}

// errx prints "prog: message" and exits (err(3) without errno).
func (p *process) errx(code int, format string, args ...any) {
	p.warnx(format, args...)
	panic(exit(code))
}

// err prints "prog: message: strerror" and exits.
func (p *process) err(code int, errno string, format string, args ...any) {
	p.warn(errno, format, args...)
	panic(exit(code))
}

func (p *process) warnx(format string, args ...any) {
	fmt.Fprintf(&p.stderr, "%s: %s\n", p.progname, escapeControls(fmt.Sprintf(format, args...)))
}

func (p *process) warn(errno string, format string, args ...any) {
	fmt.Fprintf(&p.stderr, "%s: %s: %s\n", p.progname, escapeControls(fmt.Sprintf(format, args...)), strerror[errno])
}

func (p *process) read(path string) ([]byte, error) {
	if path == "/dev/stdin" || path == "/dev/fd/0" {
		// The process's own standard input, as on macOS (fdesc).
		return p.stdin(), nil
	}
	if s, ok := p.m.Files[path]; ok {
		return []byte(s), nil
	}
	if p.readFile != nil {
		return p.readFile(path)
	}
	return os.ReadFile(path)
}
