// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/lazyregexp"
	"github.com/macake/macake/plan"
)

// ExecuteBatch runs ops with as few processes as their order allows, and
// reports each op to done as it is carried out (err nil) or fails (then it
// stops). The IFB devices the plan creates are made first, in one `ip
// -batch -`: a new IFB is inert until a redirect points at it, and making
// them first lets every tc command of the plan go to one `tc -batch -`
// instead of alternating tc and ip per link. Both tools stop at the first
// failed line and name it ("Command failed -:N"), which tells the op that
// failed; the ops before it are done. The system is then in between, as
// after Execute, and the next plan starts from what is live.
func (b *Backend) ExecuteBatch(ctx context.Context, ops []plan.Op, done func(i int, err error)) error {
	defer backend.ForgetLiveReading(ctx)
	r := batchRun{b: b, ctx: ctx, ops: ops, done: done, reported: map[int]bool{}}
	for _, i := range batchOrder(ops) {
		if err := recordIntent(b.owners(), ops[i]); err != nil {
			return r.fail(i, err)
		}
		r.intended = append(r.intended, i)
		for _, cmd := range ops[i].Commands {
			if err := r.add(i, cmd); err != nil {
				return err
			}
		}
		r.ended = append(r.ended, i)
	}
	return r.flush()
}

// batchOrder is the order ExecuteBatch runs ops in: the IFB creations
// first, then the rest in the plan's order. An IFB whose name another op
// of the plan also touches keeps its place.
func batchOrder(ops []plan.Op) []int {
	ids := map[string]int{}
	for _, op := range ops {
		ids[op.Kind+"/"+op.ID]++
	}
	var first, rest []int
	for i, op := range ops {
		if op.Kind == "ifb" && op.Action == plan.Create && ids[op.Kind+"/"+op.ID] == 1 {
			first = append(first, i)
		} else {
			rest = append(rest, i)
		}
	}
	return append(first, rest...)
}

// batchRun is one ExecuteBatch: the lines waiting for their tool, and the
// ops whose every command has been queued or run.
type batchRun struct {
	b    *Backend
	ctx  context.Context
	ops  []plan.Op
	done func(int, error)
	// tool is the tool of the pending lines, "tc" or "ip".
	tool    string
	pending []batchLine
	// ended are the ops, in execution order, whose commands have all been
	// queued or run and that are not yet reported.
	ended []int
	// intended are the ops whose intent is recorded (recordIntent), and
	// reported those reported done: a failure takes back the intent of
	// every op not done.
	intended []int
	reported map[int]bool
}

type batchLine struct {
	op   int
	args []string
}

// add queues cmd (of op i) for its tool's batch, or runs it alone when a
// batch line cannot carry it.
func (r *batchRun) add(i int, cmd execrun.Command) error {
	tool, args, ok := r.b.batchable(cmd)
	if !ok {
		if err := r.flush(); err != nil {
			return err
		}
		res, err := r.b.Runner.Run(r.ctx, cmd)
		if _, err = execrun.Check(cmd, res, err); err != nil {
			return r.fail(i, hint(err))
		}
		return nil
	}
	if tool != r.tool {
		if err := r.flush(); err != nil {
			return err
		}
		r.tool = tool
	}
	r.pending = append(r.pending, batchLine{op: i, args: args})
	return nil
}

// flush runs the pending lines, one process for all of them, and reports
// the ops that are then complete.
func (r *batchRun) flush() error {
	batch := r.pending
	r.pending = nil
	switch len(batch) {
	case 0:
	case 1:
		// One command needs no batch (and the plan's argv runs as shown).
		cmd := execrun.Command{Argv: append(r.b.toolArgv(r.tool), batch[0].args...)}
		res, err := r.b.Runner.Run(r.ctx, cmd)
		if _, err = execrun.Check(cmd, res, err); err != nil {
			return r.fail(batch[0].op, hint(err))
		}
	default:
		lines := make([]string, 0, len(batch)+1)
		for _, l := range batch {
			lines = append(lines, strings.Join(l.args, " "))
		}
		grouped := false
		if r.tool == "ip" {
			lines, grouped = r.b.deleteAsGroup(r.ctx, lines)
		}
		cmd := execrun.Command{Argv: append(r.b.toolArgv(r.tool), "-batch", "-"), Stdin: strings.Join(lines, "\n") + "\n"}
		res, err := r.b.Runner.Run(r.ctx, cmd)
		if _, err = execrun.Check(cmd, res, err); err != nil {
			// Killed or timed out, the line it reached is unknown: blame
			// the first op of the batch, the first not known to be done.
			// In a group delete nothing is done before its last line.
			failed := batch[0].op
			if n, ok := backend.FailedBatchLine(failedLineRE, res.Stderr, len(batch)); ok && !grouped {
				failed = batch[n-1].op
			}
			return r.fail(failed, hint(err))
		}
	}
	for _, i := range r.ended {
		if err := recordOwnership(r.b.owners(), r.ops[i]); err != nil {
			return r.fail(i, err)
		}
		r.report(i, nil)
	}
	r.ended = r.ended[:0]
	return nil
}

// fail reports the ops that ended before op failed as done, then failed
// with err, and returns the error naming it.
func (r *batchRun) fail(failed int, err error) error {
	n := slices.Index(r.ended, failed)
	if n < 0 {
		n = len(r.ended)
	}
	for _, i := range r.ended[:n] {
		if oerr := recordOwnership(r.b.owners(), r.ops[i]); oerr != nil {
			failed, err = i, oerr
			break
		}
		r.report(i, nil)
	}
	op := r.ops[failed]
	err = fmt.Errorf("tc: %s %s: %w", op.Action, op.Label, err)
	r.report(failed, err)
	for _, i := range r.intended {
		if !r.reported[i] || i == failed {
			forgetIntent(r.b.owners(), r.ops[i])
		}
	}
	return err
}

func (r *batchRun) report(i int, err error) {
	r.reported[i] = err == nil
	if r.done != nil {
		r.done(i, err)
	}
}

// batchable splits cmd into its tool ("tc" or "ip") and the arguments a
// batch line takes, when it is a plain tc or ip command of b's tools.
func (b *Backend) batchable(cmd execrun.Command) (tool string, args []string, ok bool) {
	if len(cmd.Argv) == 0 || cmd.Stdin != "" {
		return "", nil, false
	}
	for _, t := range []string{"tc", "ip"} {
		prefix := b.toolArgv(t)
		if len(cmd.Argv) <= len(prefix) || !slices.Equal(cmd.Argv[:len(prefix)], prefix) {
			continue
		}
		args := cmd.Argv[len(prefix):]
		for _, a := range args {
			// A batch line is split on blanks; an argument that holds one
			// (or a quote, or starts an option of the tool itself) runs
			// alone.
			if a == "" || strings.ContainsAny(a, " \t\n\"'\\#") || a == "-batch" {
				return "", nil, false
			}
		}
		return t, args, true
	}
	return "", nil, false
}

// toolArgv is how b's tools start a command: "tc" or "ip", with -n NETNS.
func (b *Backend) toolArgv(tool string) []string {
	if tool == "ip" {
		return b.Tools.ipCmd().Argv
	}
	return b.Tools.tcCmd().Argv
}

// ifbGroup is the interface group macake's IFB devices are moved to just
// before they are deleted all at once (0x4d4b, macake's handle).
const ifbGroup = "19787"

// deleteAsGroup rewrites an ip batch that deletes two or more of
// macake's IFB devices and nothing else into moving them to ifbGroup and
// deleting the group in one `link del group`: the kernel then waits for
// one RCU grace period for them all, where each `link del` waits for its
// own (200 IFBs: 3.7 s one by one, 0.06 s as a group, on Linux 6.18). It
// keeps the lines as they are unless the group holds nothing else: a
// foreign device in it would be deleted too. grouped says whether it
// rewrote them: then no device is deleted before the last line.
func (b *Backend) deleteAsGroup(ctx context.Context, lines []string) (out []string, grouped bool) {
	if len(lines) < 2 {
		return lines, false
	}
	ours := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 4 || f[0] != "link" || f[1] != "del" || f[2] != "dev" {
			return lines, false
		}
		if _, ifb := IFBSlot(f[3]); !ifb {
			return lines, false
		}
		ours[f[3]] = true
	}
	cmd := b.Tools.ipCmd("-j", "link", "show", "group", ifbGroup)
	res, err := b.Runner.Run(ctx, cmd)
	if _, err = execrun.Check(cmd, res, err); err != nil {
		return lines, false
	}
	var inGroup []struct {
		Name  string `json:"ifname"`
		Group string `json:"group"`
	}
	if json.Unmarshal(res.Stdout, &inGroup) != nil {
		return lines, false
	}
	for _, d := range inGroup {
		// iproute2 6.1 prints {} for every device outside the group.
		if d.Group == ifbGroup && !ours[d.Name] {
			return lines, false
		}
	}
	out = make([]string, 0, len(lines)+1)
	for _, l := range lines {
		out = append(out, "link set dev "+strings.Fields(l)[3]+" group "+ifbGroup)
	}
	return append(out, "link del group "+ifbGroup), true
}

// failedLineRE finds the line number in tc's or ip's "Command failed -:N".
var failedLineRE = lazyregexp.New(`Command failed -:(\d+)`)
