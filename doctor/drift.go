// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/config"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/internal/english"
	"github.com/macake/macake/plan"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/session"
)

// driftFacts is the plan a one-shot apply would make now: what differs
// between the live state and the policy files.
type driftFacts struct {
	plan plan.Plan
	// blocked says why there is no plan: "" when there is one.
	blocked string
	// needsRoot is set when reading the live state needs root.
	needsRoot bool
	err       error
}

func (in *Inspection) drift(ctx context.Context) driftFacts {
	return in.driftOnce.get(func() driftFacts {
		var d driftFacts
		cfg := in.config()
		switch {
		case in.backend().err != nil:
			d.blocked = "the backend cannot be chosen (see System)"
			return d
		case len(cfg.policyProblems) > 0 || len(cfg.settingsProblems) > 0:
			d.blocked = "the configuration has problems (see Configuration)"
			return d
		}
		if in.isPF() {
			switch l := in.pfLive(ctx); {
			case l.blocked == "root":
				d.blocked = "needs root (see pf status)"
				d.needsRoot = true
				return d
			case l.blocked != "" || l.err != nil:
				d.blocked = "pf and dummynet cannot be read (see above)"
				return d
			}
		}
		facts := in.facts(ctx)
		if facts.err != nil {
			d.blocked = "the link facts cannot be read (see Network)"
			return d
		}
		st := in.state().state
		ses, _ := session.Open(ctx, session.Options{
			Settings: &cfg.policies.Settings, State: st, Inspect: true,
			Runner: in.sys.Runner, Getenv: in.sys.Getenv, GOOS: in.sys.GOOS,
		})
		b, err := ses.Backend, ses.BackendErr
		if err != nil {
			d.blocked = "the backend cannot be opened (see System)"
			return d
		}
		links := cfg.policies.Links
		inputs := desired.Inputs{State: st, MTU: reconcile.PolicyMTUs(links), Invocation: in.sys.invocation()}
		if w := in.watch(ctx); w.status != nil {
			// watch exempts its controllers' current reflectors, which
			// are not the policy's first ones once it has rotated any.
			inputs.Reflectors = w.status.ActiveReflectors()
		}
		// As a dry run plans: a link without a slot takes the one live on
		// its interface, so a lost state file shows no phantom change.
		out := reconcile.Pass(ctx, reconcile.PassInput{Run: reconcile.Run{Backend: b}, Links: links, Facts: facts.facts, Inputs: inputs})
		d.plan = out.Plan
		switch out.Step {
		case reconcile.StepDone, reconcile.StepBlocked:
			// A blocked plan is the hook check's to say; the plan is still
			// worth showing.
		case reconcile.StepObserve:
			if backend.Unavailable(out.Err) && in.sys.EUID != 0 {
				d.needsRoot = true
			} else {
				d.err = out.Err
			}
		default:
			d.err = out.Err
		}
		return d
	})
}

func checkDrift(ctx context.Context, in *Inspection) report.Result {
	d := in.drift(ctx)
	switch {
	case d.blocked != "":
		r := skipped("%s", d.blocked)
		r.NeedsRoot = d.needsRoot
		return r
	case d.needsRoot:
		return needsRoot("cannot read the live shaping without root", "whether it matches the policy files")
	case d.err != nil:
		if ue, ok := errors.AsType[*desired.UnmeasuredError](d.err); ok {
			return warn(ue.Measure+", while on this network", "cannot work out what the policy files want: %v", d.err)
		}
		return warn("run `"+in.sys.invocation().Command(true, "plan")+"` to see the whole error", "cannot work out what the policy files want: %v", d.err)
	}
	return judgeDrift(d.plan, in.watch(ctx).state.Running, in.sys.invocation())
}

// judgeDrift compares the live state with what a one-shot apply would make.
// While watch runs, rates and queues differ from the policy's start rates
// because the controller steers them: that is not drift.
func judgeDrift(p plan.Plan, watchRunning bool, inv config.Invocation) report.Result {
	var changes, steered []string
	for _, op := range p.Ops {
		line := fmt.Sprintf("%s %s: %s", op.Action.Symbol(), op.Label, op.Reason)
		if op.Link != "" {
			line = fmt.Sprintf("%s %s (link %q): %s", op.Action.Symbol(), op.Label, op.Link, op.Reason)
		}
		if watchRunning && rateOnly(op) {
			steered = append(steered, line)
			continue
		}
		changes = append(changes, line)
	}
	unshaped := p.Unshaped()
	if len(changes) > 0 {
		fix := inv.Command(true, "apply") + " makes it match (" + inv.Command(true, "plan") + " shows the changes first)"
		if watchRunning {
			fix = "macake watch should repair this within a drift tick; if it stays, see its log and `macake status`"
		}
		for _, w := range unshaped {
			changes = append(changes, unshapedLine(w))
		}
		return warn(fix, "the live shaping differs from the policy files: %s pending", english.Plural(len(changes)-len(unshaped), "change")).With(append(changes, steered...)...)
	}
	if len(unshaped) > 0 {
		// Nothing for apply to do, yet a direction is not shaped: another
		// tool's object is in the way, or the kernel or interface lacks
		// something. Only a person can fix that.
		lines := make([]string, 0, len(unshaped))
		for _, w := range unshaped {
			lines = append(lines, unshapedLine(w))
		}
		return warn("each line says what to remove or fix; `macake plan` shows the same warnings",
			"the live shaping does not match the policy files: %s not shaped", plan.UnshapedSummary(unshaped)).With(lines...)
	}
	if len(steered) > 0 {
		return ok("the live shaping matches the policy files (%s steered by macake watch's controller)", english.Plural(len(steered), "rate")).With(steered...)
	}
	return ok("the live shaping matches the policy files")
}

func unshapedLine(w plan.Warning) string {
	if w.Link == "" {
		return "! " + w.Message
	}
	return fmt.Sprintf("! link %q: %s", w.Link, w.Message)
}

// rateOnly reports whether op only changes rates or queue sizes of an
// existing object: what the controller does all the time.
func rateOnly(op plan.Op) bool {
	if op.Action != plan.Update || len(op.Fields) == 0 {
		return false
	}
	for _, f := range op.Fields {
		if !strings.Contains(f.Key, "bits_per_second") && !strings.Contains(f.Key, "bytes") && !strings.Contains(f.Key, "bandwidth") {
			return false
		}
	}
	return true
}
