// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/session"
	"github.com/macake/macake/shape"
	"github.com/macake/macake/state"
)

var validateCmd = &command{
	name:  "validate",
	args:  "[--json] [--target darwin|linux]",
	short: "Parse and check every policy file; print FILE:LINE:COL: message per problem.",
	long: `Reads every *.toml file in the config directory (--config-dir, default
/etc/macake/links.d) and the daemon settings next to it (../macake.toml, when
present), and checks them as apply and watch would. Prints
"ok: N links (names)", or one FILE:LINE:COL: message line per problem on
stdout, every problem of every file at once. Warnings go to stderr.

Run as root, it also checks that the files and the directory are owned by
root and not writable by group or others; run as another user it skips that
check and says so. Run as root on Linux, it also tries each policy's [cake]
options on this kernel and iproute2 (in a throwaway network namespace) and
reports the ones they refuse, at their key.

Exit status: 0 when every file is valid (warnings allowed), 78 when any is
not, 64 usage.`,
}

func init() { validateCmd.run = runValidate }

// validateFormatVersion versions the --json document: consumers ignore
// unknown fields within a major version and refuse another major. 2.0:
// errors and warnings are the one error schema (diag): "col" became
// "column", and line and column are left out for a whole file.
const validateFormatVersion = "2.0"

// validateReport is the --json document.
type validateReport struct {
	FormatVersion    string                  `json:"format_version"`
	ConfigDir        string                  `json:"config_dir"`
	Target           config.Target           `json:"target"`
	Valid            bool                    `json:"valid"`
	OwnershipChecked bool                    `json:"ownership_checked"`
	Links            []desired.PolicySummary `json:"links"`
	Warnings         []config.Warning        `json:"warnings"`
	Errors           []*config.Problem       `json:"errors"`
}

func runValidate(e *env, args []string) int {
	fs := validateCmd.flags()
	asJSON := fs.Bool("json", false, "print one JSON document (links, warnings, errors)")
	target := fs.String("target", runtime.GOOS, "the `SYSTEM` the policies are for: darwin (pf + dummynet) or linux (tc)")
	if done, code := validateCmd.parse(e, fs, args); done {
		return code
	}
	if done, code := validateCmd.noArgs(e, fs); done {
		return code
	}
	t := config.Target(*target)
	if t != config.TargetDarwin && t != config.TargetLinux {
		fmt.Fprintf(e.stderr, "macake validate: --target %q: want darwin or linux\n", *target)
		return exitUsage
	}
	asRoot := e.euid() == 0
	opts := session.LoadOptions(t, !asRoot)
	opts.Context = e.ctx
	if !asRoot {
		fmt.Fprintln(e.stderr, "note: not running as root: file ownership and mode checks skipped")
	}
	tryCake := t == config.TargetLinux && runtime.GOOS == "linux"
	if tryCake && asRoot {
		opts.CheckCake = cakeCheckOnThisSystem(e)
	}

	settings, dwarn, derr := settings.LoadDaemon(settings.DaemonFileFor(e.configDir), opts)
	opts.Invocation = e.invocation()
	opts.Measured = measuredIn(settings.StateDirFor(e.stateDir, e.stateDir == defaultStateDir))
	links, warnings, err := config.Load(e.configDir, opts)
	if e.ctx.Err() != nil {
		fmt.Fprintf(e.stderr, "macake validate: interrupted (%v); not every file was checked\n", context.Cause(e.ctx))
		return exitFailure
	}
	if tryCake && !asRoot && slices.ContainsFunc(links, func(l config.Link) bool { return !l.Cake.IsZero() }) {
		fmt.Fprintln(e.stderr, "note: not running as root: the [cake] options are not tried on this kernel and iproute2")
	}
	problems := config.Problems(err)
	warnings = append(warnings, dwarn...)
	problems = append(problems, config.Problems(derr)...)

	code := exitOK
	if len(problems) > 0 {
		code = exitConfig
	}
	if *asJSON {
		rep := validateReport{
			FormatVersion: validateFormatVersion, ConfigDir: e.configDir, Target: t,
			Valid: len(problems) == 0, OwnershipChecked: asRoot,
			Links: []desired.PolicySummary{}, Warnings: warnings, Errors: problems,
		}
		if rep.Warnings == nil {
			rep.Warnings = []config.Warning{}
		}
		if rep.Errors == nil {
			rep.Errors = []*config.Problem{}
		}
		for _, l := range links {
			rep.Links = append(rep.Links, desired.SummarizePolicy(l))
		}
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
		return code
	}

	for _, w := range warnings {
		fmt.Fprintln(e.stderr, w.String())
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(e.stdout, p.Error())
		}
		files := map[string]bool{}
		for _, p := range problems {
			files[p.File] = true
		}
		fmt.Fprintf(e.stderr, "macake validate: %s in %s\n", plural(len(problems), "problem"), plural(len(files), "file"))
		return code
	}
	names := make([]string, len(links))
	for i, l := range links {
		names[i] = l.Name
	}
	if len(links) == 0 {
		fmt.Fprintf(e.stderr, "warning: no policy files (*.toml) in %s: nothing will be shaped\n", e.configDir)
		fmt.Fprintln(e.stdout, "ok: 0 links")
		return code
	}
	fmt.Fprintf(e.stdout, "ok: %s (%s)\n", plural(len(links), "link"), strings.Join(names, ", "))
	return code
}

// measuredIn tells validate whether a link has been measured, from the
// state file in dir, read once when the first policy with "auto" rates
// asks.
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

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// cakeCheckOnThisSystem tries each policy's CAKE options on this kernel
// with this iproute2, as the tc backend renders them, in a throwaway
// network namespace: what they refuse is a problem at its key, found
// before an apply. On a kernel without sch_cake nothing is tried (plan
// and apply say that the [cake] options are not applied).
func cakeCheckOnThisSystem(e *env) config.CakeCheck {
	tools := tc.ToolsFromEnv(e.getenv)
	run := execrun.Exec{Timeout: 10 * time.Second}
	var caps *tc.Capabilities
	return func(c *shape.Cake) []config.CakeRefusal {
		if caps == nil {
			p := tc.Probe(e.ctx, run, tools)
			caps = &p
		}
		if !caps.ShapesWithCake() {
			return nil
		}
		refusals, _ := tc.CheckCake(e.ctx, run, tools, c)
		out := make([]config.CakeRefusal, len(refusals))
		for i, r := range refusals {
			out[i] = config.CakeRefusal{Key: r.Key, Message: r.String()}
		}
		return out
	}
}
