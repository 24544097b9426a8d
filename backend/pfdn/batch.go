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
// `dnctl /dev/stdin` in file mode, one line per pipe, each run of
// consecutive pipe deletions (down: every pipe of every link) as one
// `dnctl pipe delete N…`, and every other op through Execute (the anchor
// is already one `pfctl -a … -f -`). It reports each op to done as it is
// carried out (err nil) or fails (then it stops). In file mode the first
// failed line ends the run and dnctl names it ("Line N: …"), which tells
// the op that failed; the pipes before it are configured, and the next
// plan starts from what is live. A delete goes on past a number it could
// not delete and names each ("rule N: …"): a pipe already gone is done,
// as for Execute, and the first other failure is the run's.
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
			if n, ok := backend.FailedBatchLine(dnctlLineRE, res.Stderr, len(batch)); ok {
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
	var deletes []int
	flushDeletes := func() error {
		batch := deletes
		deletes = nil
		return b.deletePipes(ctx, ops, batch, report)
	}
	for i, op := range ops {
		if b.batchablePipe(op) {
			if err := flushDeletes(); err != nil {
				return err
			}
			run = append(run, i)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if b.batchableDelete(op) {
			deletes = append(deletes, i)
			continue
		}
		if err := flushDeletes(); err != nil {
			return err
		}
		if err := b.executeReported(ctx, ops, i, report); err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return flushDeletes()
}

// batchableDelete reports whether op is one `dnctl pipe delete N`, which
// a delete of several numbers carries as it is.
func (b *Backend) batchableDelete(op plan.Op) bool {
	if op.Kind != KindPipe || op.Action != plan.Remove || len(op.Commands) != 1 {
		return false
	}
	a := op.Commands[0].Argv
	if op.Commands[0].Stdin != "" || len(a) != 4 || a[0] != b.opts.Dnctl || a[1] != "pipe" || a[2] != "delete" {
		return false
	}
	_, err := strconv.ParseUint(a[3], 10, 16)
	return err == nil
}

// dnctlDeleteRE is the warning of a number `dnctl pipe delete` could not
// delete (reference §1.3): "dnctl: rule N: setsockopt(IP_DUMMYNET_DEL):
// REASON".
var dnctlDeleteRE = lazyregexp.New(`(?m)rule (\d+): setsockopt\(IP_DUMMYNET_DEL\): (.*)$`)

// deletePipes runs the pipe deletions ops[batch] as one `dnctl pipe
// delete N…` (one op alone through Execute) and reports each: done, or
// gone already (done too), or failed. dnctl tries every number and exits
// 1 if one failed, naming each that did; a failure it names for no number
// (killed, timed out) leaves every op undone.
func (b *Backend) deletePipes(ctx context.Context, ops []plan.Op, batch []int, report func(int, error)) error {
	switch len(batch) {
	case 0:
		return nil
	case 1:
		return b.executeReported(ctx, ops, batch[0], report)
	}
	cmd := execrun.Command{Argv: []string{b.opts.Dnctl, "pipe", "delete"}}
	for _, i := range batch {
		cmd.Argv = append(cmd.Argv, ops[i].Commands[0].Argv[3])
	}
	res, err := b.runOne(ctx, cmd)
	failed := map[string]string{}
	if err == nil && res.ExitCode != 0 {
		for _, m := range dnctlDeleteRE.FindAllStringSubmatch(string(res.Stderr), -1) {
			if !strings.HasPrefix(m[2], "Invalid argument") {
				failed[m[1]] = m[2]
			}
		}
		if len(failed) == 0 && !strings.Contains(string(res.Stderr), msgPipeMissing) {
			// Neither a pipe that is gone nor one named as failed: dnctl
			// itself failed, and nothing is known to be done.
			err = &execrun.Error{Argv: cmd.Argv, ExitCode: res.ExitCode, Stderr: res.Stderr}
		}
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", ops[batch[0]].Label, err)
		report(batch[0], err)
		return err
	}
	var first error
	for _, i := range batch {
		n := ops[i].Commands[0].Argv[3]
		why, bad := failed[n]
		if !bad {
			report(i, nil)
			continue
		}
		opErr := fmt.Errorf("%s: %w", ops[i].Label, &execrun.Error{Argv: []string{b.opts.Dnctl, "pipe", "delete", n}, ExitCode: res.ExitCode,
			Stderr: []byte("dnctl: rule " + n + ": setsockopt(IP_DUMMYNET_DEL): " + why + "\n")})
		report(i, opErr)
		if first == nil {
			first = opErr
		}
	}
	return first
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

// dnctlLineRE finds the failed line's number in dnctl's file-mode stderr
// ("Line N: message").
var dnctlLineRE = lazyregexp.New(`(?m)^Line (\d+): `)
