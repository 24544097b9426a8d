// SPDX-License-Identifier: Apache-2.0

package tc

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/macake/macake/execrun"
	"github.com/macake/macake/shape"
)

// A kernel or an iproute2 that cannot do one of a policy's CAKE options
// refuses the whole command that names it, in the middle of an apply.
// Before a plan touches a CAKE shaper, Backend.Plan tries its options in a
// throwaway network namespace (as Probe tries the qdiscs): a set the
// kernel or tc refuses leaves that direction of the link as it is, with a
// warning naming the option, the policy key and what to do, instead of a
// failed apply. Each distinct set is tried once per Backend.

// CakeRefusal is an option set the kernel or iproute2 refused.
type CakeRefusal struct {
	// Key is the policy key of the refused option, e.g. "cake.wash", or
	// "" when no single option is refused but their combination is.
	Key string
	// Option is the refused option in tc's words, e.g. "wash".
	Option string
	// Message is tc's or the kernel's own error.
	Message string
}

// Fix says what to do about the refusal.
func (r CakeRefusal) Fix() string {
	key := r.Key
	if key == "" {
		key = "the [cake] options"
	}
	if strings.HasPrefix(r.Message, "What is") || strings.Contains(r.Message, "Illegal") {
		return fmt.Sprintf("this iproute2 (tc) does not know it: upgrade iproute2, or change %s", key)
	}
	return fmt.Sprintf("the kernel's sch_cake refuses it: change %s, or use a kernel whose sch_cake takes it", key)
}

func (r CakeRefusal) String() string {
	what := "the CAKE options"
	if r.Option != "" {
		what = fmt.Sprintf("CAKE's %q", r.Option)
		if r.Key != "" {
			what += " (" + r.Key + ")"
		}
	}
	return fmt.Sprintf("%s refused: %s; %s", what, r.Message, r.Fix())
}

// cakeTrialKey identifies a shaper's option set; the rate is left out
// (any rate goes), since only the options can be refused.
func cakeTrialKey(s shaperSpec) string {
	var parts []string
	for _, o := range cakeOptions(s)[1:] {
		parts = append(parts, strings.Join(o.args, " "))
	}
	return strings.Join(parts, " ")
}

// trialArgs is what a trial of s's options adds on lo.
func trialArgs(s shaperSpec) string {
	t := s
	t.pipe.RateBits = 1_000_000
	return strings.Join(cakeArgs(t), " ")
}

// cakeRefusals returns the refusals of the CAKE shapers desired wants, by
// trial key, trying the sets not tried before. Trying needs root (a
// network namespace); without it nothing is known and nothing refused.
func (b *Backend) cakeRefusals(ctx context.Context, desired shape.State) map[string]CakeRefusal {
	var specs []shaperSpec
	for _, l := range desired.Links {
		if checkLink(l) != nil {
			continue
		}
		for _, dir := range shape.Directions {
			specs = append(specs, specFor(l, dir, true))
		}
	}
	b.mu.Lock()
	if b.cakeUntriable {
		b.mu.Unlock()
		return nil
	}
	if b.cakeTried == nil {
		b.cakeTried = map[string]*CakeRefusal{}
	}
	var untried []shaperSpec
	seen := map[string]bool{}
	for _, s := range specs {
		k := cakeTrialKey(s)
		if _, done := b.cakeTried[k]; !done && !seen[k] {
			seen[k] = true
			untried = append(untried, s)
		}
	}
	b.mu.Unlock()
	if len(untried) > 0 {
		verdicts, ok := tryCake(ctx, b.Runner, b.Tools, untried)
		b.mu.Lock()
		if ok {
			for i, s := range untried {
				b.cakeTried[cakeTrialKey(s)] = verdicts[i]
			}
		} else {
			// No namespace to try in (no CAP_SYS_ADMIN): this process
			// never will have one, so it stops asking.
			b.cakeUntriable = true
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]CakeRefusal{}
	for _, s := range specs {
		if r := b.cakeTried[cakeTrialKey(s)]; r != nil {
			out[cakeTrialKey(s)] = *r
		}
	}
	return out
}

// CheckCake tries the CAKE options c asks for (both directions, as the
// backend would render them) and returns what the kernel or iproute2
// refuses; ok is false when they could not be tried (not root, not
// Linux). `macake validate` reports the refusals at their keys.
func CheckCake(ctx context.Context, r execrun.Runner, t Tools, c *shape.Cake) (refusals []CakeRefusal, ok bool) {
	l := shape.Link{Name: "check", Interface: "lo", Cake: c,
		Upload: shape.Pipe{RateBits: 1_000_000, QueueBytes: 10_000}, Download: shape.Pipe{RateBits: 1_000_000, QueueBytes: 10_000}}
	specs := []shaperSpec{specFor(l, shape.Upload, true), specFor(l, shape.Download, true)}
	verdicts, ok := tryCake(ctx, r, t, specs)
	if !ok {
		return nil, false
	}
	seen := map[CakeRefusal]bool{}
	for _, v := range verdicts {
		if v != nil && !seen[*v] {
			seen[*v] = true
			refusals = append(refusals, *v)
		}
	}
	return refusals, true
}

// tryCake adds CAKE with each spec's options on the loopback device of a
// throwaway network namespace, one `tc -force -batch -` for all of them,
// and for each refused set tries its options one at a time to name the
// one refused. verdicts[i] is nil where specs[i] was taken.
func tryCake(ctx context.Context, r execrun.Runner, t Tools, specs []shaperSpec) (verdicts []*CakeRefusal, ok bool) {
	if runtime.GOOS != "linux" || len(specs) == 0 {
		return nil, false
	}
	lines := make([]string, len(specs))
	for i, s := range specs {
		lines[i] = trialArgs(s)
	}
	failed, ok := tryCakeLines(ctx, r, t, lines)
	if !ok {
		return nil, false
	}
	verdicts = make([]*CakeRefusal, len(specs))
	for i, s := range specs {
		msg, refused := failed[i]
		if !refused {
			continue
		}
		v := &CakeRefusal{Message: msg}
		// Which option? Each alone, on top of the bandwidth.
		opts := cakeOptions(s)[1:]
		single := make([]string, len(opts))
		for j, o := range opts {
			single[j] = "cake bandwidth 1000000bit " + strings.Join(o.args, " ")
		}
		if alone, ok := tryCakeLines(ctx, r, t, single); ok {
			for j, o := range opts {
				if m, bad := alone[j]; bad {
					v.Key, v.Option, v.Message = o.key, strings.Join(o.args, " "), m
					break
				}
			}
		}
		verdicts[i] = v
	}
	return verdicts, true
}

// tryCakeLines adds each qdisc of lines (arguments after "root handle
// 1:") on lo in a throwaway namespace and deletes it again; it returns
// the refused ones by index, with the error tc printed for each.
func tryCakeLines(ctx context.Context, r execrun.Runner, t Tools, lines []string) (failed map[int]string, ok bool) {
	var stdin strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&stdin, "qdisc add dev lo root handle 1: %s\nqdisc del dev lo root\n", l)
	}
	res, err := r.Run(ctx, execrun.Command{Argv: []string{t.Unshare, "--net", t.TC, "-force", "-batch", "-"}, Stdin: stdin.String()})
	if err != nil {
		return nil, false
	}
	byLine, ok := batchErrors(res)
	if !ok {
		return nil, false
	}
	failed = map[int]string{}
	for n, msg := range byLine {
		if n%2 == 1 { // the add of lines[(n-1)/2]; a failed del follows a failed add
			failed[(n-1)/2] = msg
		}
	}
	return failed, true
}

// batchErrors maps the failed lines of a `tc -force -batch` run to the
// first line of the error tc printed before "Command failed -:N". ok is
// false when the batch did not run (unshare refused: not root).
func batchErrors(res execrun.Result) (map[int]string, bool) {
	out := map[int]string{}
	var msg []string
	for _, line := range strings.Split(string(res.Stderr), "\n") {
		if m := batchFailRE.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			first := ""
			for _, l := range msg {
				if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "Usage:") {
					first = l
					break
				}
			}
			out[n] = strings.TrimPrefix(strings.TrimSpace(first), "Error: ")
			msg = nil
			continue
		}
		msg = append(msg, line)
	}
	if res.ExitCode != 0 && len(out) == 0 {
		return nil, false
	}
	return out, true
}

// cakeRefusalOf returns the refusal of s's options in live, if any.
func cakeRefusalOf(live Live, s shaperSpec) (CakeRefusal, bool) {
	if !s.cake || len(live.CakeRefusals) == 0 {
		return CakeRefusal{}, false
	}
	r, ok := live.CakeRefusals[cakeTrialKey(s)]
	return r, ok
}
