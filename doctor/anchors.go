// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/english"
)

// nlcAnchor is the top-level anchor of Network Link Conditioner; the kernel
// special-cases it (reference pf-dummynet §2.10, §4.4).
const nlcAnchor = "com.apple.nlc"

// anchorRules is one foreign anchor's dummynet rules.
type anchorRules struct {
	path  string
	rules pfdn.RuleList
	err   error
}

// base returns the anchor's last path component.
func (a anchorRules) base() string { return a.path[strings.LastIndexByte(a.path, '/')+1:] }

// anchorFacts is what the pf anchors other than macake's hold.
type anchorFacts struct {
	// parent is the anchor whose wildcard evaluates macake's ("com.apple");
	// "" when macake's anchor is at the top level.
	parent string
	// siblings are parent's other children, in evaluation (name) order.
	siblings []anchorRules
	// nlc are Network Link Conditioner's anchors.
	nlc []anchorRules
	err error
}

func (in *Inspection) anchors(ctx context.Context) anchorFacts {
	return in.anchorsOnce.get(func() anchorFacts {
		l := in.pfLive(ctx)
		var f anchorFacts
		if l.blocked != "" || l.err != nil {
			return f
		}
		read := func(path string) anchorRules {
			a := anchorRules{path: path}
			res, err := runPfctl(ctx, in.sys.Runner, l.opts.Pfctl, "-a", path, "-s", "dummynet")
			if err != nil {
				a.err = err
				return a
			}
			a.rules, a.err = pfdn.ParseRules(res.Stdout, res.Stderr)
			return a
		}
		list := func(path string) ([]string, error) {
			args := []string{"-s", "Anchors"}
			if path != "" {
				args = []string{"-a", path, "-s", "Anchors"}
			}
			res, err := runPfctl(ctx, in.sys.Runner, l.opts.Pfctl, args...)
			if err != nil {
				return nil, err
			}
			return pfdn.ParseAnchors(res.Stdout, res.Stderr)
		}
		anchor := l.opts.Anchor
		if i := strings.LastIndexByte(anchor, '/'); i >= 0 {
			f.parent = anchor[:i]
			children, err := list(f.parent)
			if err != nil && !errors.Is(err, pfdn.ErrAnchorMissing) {
				f.err = err
				return f
			}
			for _, c := range children {
				if c != anchor {
					f.siblings = append(f.siblings, read(c))
				}
			}
		}
		top, err := list("")
		if err != nil {
			f.err = err
			return f
		}
		for _, t := range top {
			if t != nlcAnchor && !strings.HasPrefix(t, nlcAnchor) {
				continue
			}
			f.nlc = append(f.nlc, read(t))
			sub, err := list(t)
			if err != nil && !errors.Is(err, pfdn.ErrAnchorMissing) {
				f.err = err
				return f
			}
			for _, s := range sub {
				f.nlc = append(f.nlc, read(s))
			}
		}
		return f
	})
}

// runPfctl runs one read-only pfctl call; show commands exit 0 even when
// they fail, so a non-zero exit is an error.
func runPfctl(ctx context.Context, r execrun.Runner, pfctl string, args ...string) (execrun.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, ToolTimeout)
	defer cancel()
	argv := append([]string{pfctl}, args...)
	res, err := r.Run(ctx, execrun.Command{Argv: argv})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("`%s` exited %d: %s", strings.Join(argv, " "), res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	return res, err
}

func checkForeignAnchors(ctx context.Context, in *Inspection) report.Result {
	l := in.pfLive(ctx)
	if r, gated := pfGate(l); gated {
		return r
	}
	f := in.anchors(ctx)
	if f.err != nil {
		return problem("run `sudo pfctl -a com.apple -s Anchors` by hand; output macake cannot read is worth a bug report", "listing pf anchors failed: %v", f.err)
	}
	return judgeForeignAnchors(l.live, f, l.opts.Anchor, in.shapedInterfaces(ctx, l.live))
}

// shapedInterfaces are the interfaces macake shapes or is about to: those
// of its live rules and of the active policies.
func (in *Inspection) shapedInterfaces(ctx context.Context, live pfdn.Live) map[string]bool {
	m := map[string]bool{}
	for _, r := range live.Anchor.Rules {
		if r.Interface != "" {
			m[r.Interface] = true
		}
	}
	for _, l := range in.facts(ctx).selection.Active {
		m[l.Match.Interface] = true
	}
	return m
}

// conflict describes how a foreign dummynet rule can take traffic from
// macake's rules, or "" when it cannot. after tells whether pf evaluates
// the rule after macake's anchor. pf uses the last matching dummynet rule,
// unless a quick one stops the evaluation first.
func conflict(r pfdn.Rule, after bool, shaped map[string]bool) string {
	if r.Action == "dummynet-anchor" {
		if after {
			return "its anchor is evaluated after macake's, so its rules win for the traffic they match"
		}
		return ""
	}
	if r.Interface != "" && len(shaped) > 0 && !shaped[r.Interface] {
		return ""
	}
	quick := strings.Contains(" "+r.Text+" ", " quick ")
	switch {
	case after:
		return "evaluated after macake's rules, it wins for the traffic it matches (pf uses the last matching dummynet rule)"
	case quick:
		return "a quick rule evaluated before macake's anchor: the traffic it matches never reaches macake's rules"
	}
	return ""
}

// judgeForeignAnchors checks the main ruleset and the anchors beside
// macake's for dummynet rules that can take traffic away from macake's.
// Network Link Conditioner is judged on its own (judgeNLC).
func judgeForeignAnchors(live pfdn.Live, f anchorFacts, anchor string, shaped map[string]bool) report.Result {
	var conflicts, harmless []string
	target := anchor
	if f.parent != "" {
		target = f.parent + "/*"
	}
	hook := -1
	for i, r := range live.Main.Rules {
		if r.Action == "dummynet-anchor" && r.Anchor == target {
			hook = i
			break
		}
	}
	for i, r := range live.Main.Rules {
		if i == hook || strings.HasPrefix(r.Anchor, nlcAnchor) {
			continue
		}
		if why := conflict(r, hook >= 0 && i > hook, shaped); why != "" {
			conflicts = append(conflicts, fmt.Sprintf("main ruleset: %s: %s", r.Text, why))
		} else {
			harmless = append(harmless, fmt.Sprintf("main ruleset: %s", r.Text))
		}
	}
	name := anchor[strings.LastIndexByte(anchor, '/')+1:]
	var quiet []string
	for _, s := range f.siblings {
		if s.err != nil {
			conflicts = append(conflicts, fmt.Sprintf("%s: its rules could not be read: %v", s.path, s.err))
			continue
		}
		if len(s.rules.Rules) == 0 {
			quiet = append(quiet, s.base())
			continue
		}
		after := s.base() > name
		for _, r := range s.rules.Rules {
			if why := conflict(r, after, shaped); why != "" {
				conflicts = append(conflicts, fmt.Sprintf("%s: %s: %s", s.path, r.Text, why))
			} else {
				harmless = append(harmless, fmt.Sprintf("%s: %s", s.path, r.Text))
			}
		}
	}
	details := append(conflicts, harmless...)
	quietNote := ""
	if len(quiet) > 0 {
		quietNote = fmt.Sprintf(" (%s %s no dummynet rules)", strings.Join(quiet, ", "), oneOrMany(len(quiet), "has", "have"))
	}
	if len(conflicts) > 0 {
		return warn("those rules belong to another tool, which macake never touches: stop that tool, or remove its rules yourself (e.g. sudo pfctl -a ANCHOR -F all)",
			"%s of other tools can take traffic from macake's anchor%s", english.Plural(len(conflicts), "dummynet rule"), quietNote).With(details...)
	}
	if len(harmless) > 0 {
		return ok("other tools' dummynet rules do not overlap macake's%s", quietNote).With(details...)
	}
	where := "beside macake's anchor"
	if f.parent != "" {
		where = fmt.Sprintf("under %s", f.parent)
	}
	return ok("no other dummynet rules in the main ruleset or %s%s", where, quietNote)
}

func checkNLC(ctx context.Context, in *Inspection) report.Result {
	l := in.pfLive(ctx)
	if r, gated := pfGate(l); gated {
		return r
	}
	f := in.anchors(ctx)
	if f.err != nil {
		return skipped("listing pf anchors failed (see the anchors check)")
	}
	return judgeNLC(f)
}

// judgeNLC reports Network Link Conditioner: while it is on, its quick
// rules shape the traffic too, and macake's controller measures both.
func judgeNLC(f anchorFacts) report.Result {
	var rules []string
	pipes := map[int]bool{}
	var paths []string
	for _, a := range f.nlc {
		paths = append(paths, a.path)
		for _, r := range a.rules.Rules {
			rules = append(rules, fmt.Sprintf("%s: %s", a.path, r.Text))
			if r.Pipe != 0 {
				pipes[r.Pipe] = true
			}
		}
	}
	if len(rules) == 0 {
		if len(paths) > 0 {
			return ok("off (its anchor %s has no dummynet rules)", strings.Join(paths, ", "))
		}
		return ok("off")
	}
	var nums []int
	for p := range pipes {
		nums = append(nums, p)
	}
	sort.Ints(nums)
	pipeNote := ""
	if len(nums) > 0 {
		pipeNote = ", pipes " + joinInts(nums, 6)
	}
	return warn("turn it off (Network Link Conditioner in System Settings, or its preference pane) while macake shapes",
		"on (%s%s): its quick rules shape the traffic as well, so macake's controller measures NLC's delay, not the link's",
		english.Plural(len(rules), "dummynet rule"), pipeNote).With(rules...)
}
