// SPDX-License-Identifier: Apache-2.0

package pfcheck

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/macake/macake/backend/pfdn"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/selftest/scratch"
)

// tokenWindow is how long after its start a selftest may have taken a pf
// reference (a run lasts well under a minute), and tokenSlack how much
// earlier, for pf's whole-second ages and two clocks.
const (
	tokenWindow = 10 * time.Minute
	tokenSlack  = time.Minute
)

// RemoveScratch removes the scratch objects rec names, in the order that
// keeps traffic flowing: the anchor's rules first (a rule naming a
// deleted pipe would blackhole its traffic), then the pipes, then the pf
// references. What is already gone is fine. Only the scratch anchor and
// pipes in ScratchPipes are ever touched, whatever the record says; a
// recorded token is released only if the reference holding it now was
// taken during that selftest (now minus its age), because a token is a
// hash of a kernel address: after a reboot or a pfctl -d invalidated the
// selftest's, another holder's (the daemon's) can carry the same number.
// It returns what it removed and what it could not remove; a failure to
// flush the anchor stops it before the pipes.
func RemoveScratch(ctx context.Context, run execrun.Runner, pfctl, dnctl string, rec scratch.Record, now time.Time) (done []string, errs []error) {
	do := func(argv ...string) (execrun.Result, error) {
		cmd := execrun.Command{Argv: argv}
		return run.Run(ctx, cmd)
	}
	if rec.Anchor != "" {
		if rec.Anchor != ScratchAnchor {
			errs = append(errs, fmt.Errorf("the scratch record names anchor %q, not %q; left alone", rec.Anchor, ScratchAnchor))
		} else {
			res, err := do(pfctl, "-a", rec.Anchor, "-s", "dummynet")
			var rules pfdn.RuleList
			if err == nil {
				rules, err = pfdn.ParseRules(res.Stdout, res.Stderr)
			}
			switch {
			case err != nil:
				return done, append(errs, fmt.Errorf("reading the scratch anchor %s: %w", rec.Anchor, err))
			case rules.Exists:
				cmd := execrun.Command{Argv: []string{pfctl, "-a", rec.Anchor, "-F", "all"}}
				if _, err := runChecked(ctx, run, cmd); err != nil {
					return done, append(errs, fmt.Errorf("flushing the scratch anchor (its pipes are kept until it is gone): %w", err))
				}
				done = append(done, "flushed anchor "+rec.Anchor)
			}
		}
	}
	if len(rec.Pipes) > 0 {
		res, err := do(dnctl, "list")
		var live pfdn.Dummynet
		if err == nil && res.ExitCode != 0 {
			err = &execrun.Error{Argv: []string{dnctl, "list"}, ExitCode: res.ExitCode, Stderr: res.Stderr}
		}
		if err == nil {
			live, err = pfdn.ParseDummynet(res.Stdout)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the scratch pipes: %w", err))
		} else {
			for _, n := range rec.Pipes {
				if !ScratchPipes.Contains(n) {
					errs = append(errs, fmt.Errorf("the scratch record names pipe %d, outside the scratch range %s; left alone", n, ScratchPipes))
					continue
				}
				if _, ok := live.Pipe(n); !ok {
					continue
				}
				cmd := execrun.Command{Argv: []string{dnctl, "pipe", "delete", strconv.Itoa(n)}}
				if _, err := runChecked(ctx, run, cmd); err != nil {
					errs = append(errs, err)
					continue
				}
				done = append(done, "deleted pipe "+strconv.Itoa(n))
			}
		}
	}
	if len(rec.Tokens) > 0 {
		res, err := do(pfctl, "-s", "References")
		var refs []pfdn.Reference
		if err == nil {
			refs, _, err = pfdn.ParseReferences(res.Stdout, res.Stderr)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading pf's references: %w", err))
			return done, errs
		}
		for _, tok := range rec.Tokens {
			i := slices.IndexFunc(refs, func(r pfdn.Reference) bool { return r.Token == tok })
			if i < 0 {
				continue // released already, or gone with pfctl -d or a reboot
			}
			if taken := now.Add(-refs[i].Age); taken.Before(rec.Started.Add(-tokenSlack)) || taken.After(rec.Started.Add(tokenWindow)) {
				continue // the same number, another holder's reference
			}
			cmd := execrun.Command{Argv: []string{pfctl, "-X", tok}}
			if _, err := runChecked(ctx, run, cmd); err != nil {
				errs = append(errs, err)
				continue
			}
			done = append(done, "released pf reference "+tok)
		}
	}
	return done, errs
}

// runChecked runs cmd; a non-zero exit is an error.
func runChecked(ctx context.Context, run execrun.Runner, cmd execrun.Command) (execrun.Result, error) {
	res, err := run.Run(ctx, cmd)
	return execrun.Check(cmd, res, err)
}
