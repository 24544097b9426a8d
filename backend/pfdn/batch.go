// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/lazyregexp"
	"github.com/macake/macake/plan"
)

// dnctlStdin is the file dnctl reads its commands from in a batch. dnctl
// runs in file mode when its last argument is a readable absolute path
// (reference §1.1), and /dev/stdin is one on macOS.
const dnctlStdin = "/dev/stdin"

// ExecuteBatch runs ops in the plan's order, each run of consecutive pipe
// configurations (apply from empty: every pipe of every link) as one
// `dnctl /dev/stdin` in file mode, one line per pipe, and every other op
// through Execute (the anchor is already one `pfctl -a … -f -`). It
// reports each op to done as it is carried out (err nil) or fails (then it
// stops). In file mode the first failed line ends the run and dnctl names
// it ("Line N: …"), which tells the op that failed; the pipes before it
// are configured, and the next plan starts from what is live.
func (b *Backend) ExecuteBatch(ctx context.Context, ops []plan.Op, done func(i int, err error)) error {
	defer backend.ForgetLiveReading(ctx)
	report := func(i int, err error) {
		if done != nil {
			done(i, err)
		}
	}
	var run []int
	flush := func() error {
		batch := run
		run = nil
		if len(batch) == 1 {
			return b.executeReported(ctx, ops, batch[0], report)
		}
		if len(batch) == 0 {
			return nil
		}
		var stdin strings.Builder
		for _, i := range batch {
			stdin.WriteString(strings.Join(ops[i].Commands[0].Argv[1:], " "))
			stdin.WriteByte('\n')
		}
		cmd := execrun.Command{Argv: []string{b.opts.Dnctl, dnctlStdin}, Stdin: stdin.String()}
		res, err := b.runOne(ctx, cmd)
		if err == nil && res.ExitCode != 0 {
			err = &execrun.Error{Argv: cmd.Argv, ExitCode: res.ExitCode, Stderr: res.Stderr}
		}
		failed := len(batch)
		if err != nil {
			// Without a line named (killed, timed out, no socket) the
			// first pipe is the first not known to be done.
			failed = 0
			if n, ok := dnctlFailedLine(res.Stderr); ok && n >= 1 && n <= len(batch) {
				failed = n - 1
			}
		}
		for _, i := range batch[:failed] {
			report(i, nil)
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", ops[batch[failed]].Label, err)
			report(batch[failed], err)
		}
		return err
	}
	for i, op := range ops {
		if b.batchablePipe(op) {
			run = append(run, i)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if err := b.executeReported(ctx, ops, i, report); err != nil {
			return err
		}
	}
	return flush()
}

// executeReported is Execute of ops[i], reported.
func (b *Backend) executeReported(ctx context.Context, ops []plan.Op, i int, report func(int, error)) error {
	err := b.Execute(ctx, ops[i])
	report(i, err)
	return err
}

// batchablePipe reports whether op is a pipe configuration a dnctl file
// line carries as it is: one `dnctl pipe N config …` whose words hold no
// blank or '#' (a line is split on blanks and ends at '#'). A pipe delete
// is not: a pipe already gone answers an error that would end the file,
// where Execute takes it as done.
func (b *Backend) batchablePipe(op plan.Op) bool {
	if op.Kind != KindPipe || op.Action == plan.Remove || len(op.Commands) != 1 {
		return false
	}
	cmd := op.Commands[0]
	if cmd.Stdin != "" || len(cmd.Argv) < 4 || cmd.Argv[0] != b.opts.Dnctl || cmd.Argv[1] != "pipe" {
		return false
	}
	for _, a := range cmd.Argv[1:] {
		if a == "" || strings.ContainsAny(a, " \t\n\r\f\v#,") {
			return false
		}
	}
	return true
}

var dnctlLineRE = lazyregexp.New(`(?m)^Line (\d+): `)

// dnctlFailedLine reads the failed line's number from dnctl's file-mode
// stderr ("Line N: message").
func dnctlFailedLine(stderr []byte) (int, bool) {
	m := dnctlLineRE.FindSubmatch(stderr)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(string(m[1]))
	return n, err == nil
}
