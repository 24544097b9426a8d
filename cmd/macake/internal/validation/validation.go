// SPDX-License-Identifier: Apache-2.0

// Package validation is `macake validate`'s check: the daemon settings
// and every policy file read as apply and watch read them (with the
// ownership checks as root, the [cake] options tried on this kernel, and
// whether an "auto" link has been measured), and the --json document of
// what it found. Package main prints it.
package validation

import (
	"context"
	"slices"
	"sync"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/session"
	"github.com/macake/macake/state"
)

// FormatVersion versions the --json document: consumers ignore unknown
// fields within a major version and refuse another major. 2.0: errors and
// warnings are the one error schema (diag): "col" became "column", and
// line and column are left out for a whole file.
const FormatVersion = "2.0"

// Options are what is validated, and how.
type Options struct {
	Ctx context.Context
	// ConfigDir and StateDir are --config-dir and --state-dir;
	// StateDirIsDefault tells that --state-dir was left at its default
	// (macake.toml's state_dir then applies).
	ConfigDir, StateDir string
	StateDirIsDefault   bool
	// Target is the system the policies are for.
	Target config.Target
	// AsRoot checks the files' ownership and mode.
	AsRoot bool
	// CheckCake, when set, tries a policy's [cake] options on this
	// system; TriesCake tells that this system could (Linux policies on
	// Linux), so that a run without root says they were not tried.
	CheckCake config.CakeCheck
	TriesCake bool
	// Invocation is how the person ran macake, for the commands the
	// messages name.
	Invocation config.Invocation
}

// Result is what a validation found.
type Result struct {
	Links    []config.Link
	Warnings []config.Warning
	Problems []*config.Problem
	// CakeNotTried tells that policies have [cake] options this kernel
	// was not asked about, for want of root.
	CakeNotTried bool
}

// Run reads the daemon settings and every policy file. It fails only
// when interrupted, with the context's cause: not every file was checked.
func Run(o Options) (Result, error) {
	opts := session.LoadOptions(o.Target, !o.AsRoot)
	opts.Context = o.Ctx
	opts.CheckCake = o.CheckCake
	settings, dwarn, derr := settings.LoadDaemon(settings.DaemonFileFor(o.ConfigDir), opts)
	opts.Invocation = o.Invocation
	opts.Measured = measuredIn(settings.StateDirFor(o.StateDir, o.StateDirIsDefault))
	links, warnings, err := config.Load(o.ConfigDir, opts)
	if o.Ctx.Err() != nil {
		return Result{}, context.Cause(o.Ctx)
	}
	return Result{
		Links: links, Warnings: append(warnings, dwarn...), Problems: append(config.Problems(err), config.Problems(derr)...),
		CakeNotTried: o.TriesCake && !o.AsRoot && slices.ContainsFunc(links, func(l config.Link) bool { return !l.Cake.IsZero() }),
	}, nil
}

// measuredIn tells whether a link has been measured, from the state file
// in dir, read once when the first policy with "auto" rates asks.
func measuredIn(dir string) func(link string) (measured, known bool) {
	var st *state.State
	var err error
	read := sync.OnceFunc(func() { st, err = state.Load(dir) })
	return func(link string) (bool, bool) {
		read()
		if err != nil {
			return false, false
		}
		return st.MeasuredLink(link), true
	}
}

// Report is the --json document.
type Report struct {
	FormatVersion    string                  `json:"format_version"`
	ConfigDir        string                  `json:"config_dir"`
	Target           config.Target           `json:"target"`
	Valid            bool                    `json:"valid"`
	OwnershipChecked bool                    `json:"ownership_checked"`
	Links            []desired.PolicySummary `json:"links"`
	Warnings         []config.Warning        `json:"warnings"`
	Errors           []*config.Problem       `json:"errors"`
}

// Report is the --json document of r, made with o; its lists are empty,
// never null.
func (r Result) Report(o Options) Report {
	rep := Report{
		FormatVersion: FormatVersion, ConfigDir: o.ConfigDir, Target: o.Target,
		Valid: len(r.Problems) == 0, OwnershipChecked: o.AsRoot,
		Links: []desired.PolicySummary{}, Warnings: r.Warnings, Errors: r.Problems,
	}
	if rep.Warnings == nil {
		rep.Warnings = []config.Warning{}
	}
	if rep.Errors == nil {
		rep.Errors = []*config.Problem{}
	}
	for _, l := range r.Links {
		rep.Links = append(rep.Links, desired.SummarizePolicy(l))
	}
	return rep
}
