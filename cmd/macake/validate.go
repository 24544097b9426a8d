// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/macake/macake/backend/tc"
	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/cmd/macake/internal/validation"
	"github.com/macake/macake/config"
	"github.com/macake/macake/execrun"
	"github.com/macake/macake/internal/english"
	"github.com/macake/macake/shape"
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

func runValidate(e *env, args []string) int {
	fs := validateCmd.flags()
	asJSON := fs.Bool("json", false, "print one JSON document (links, warnings, errors)")
	target := fs.String("target", runtime.GOOS, "the `SYSTEM` the policies are for: darwin (pf + dummynet) or linux (tc)")
	if done, code := validateCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	t := config.Target(*target)
	if t != config.TargetDarwin && t != config.TargetLinux {
		fmt.Fprintf(e.stderr, "macake validate: --target %q: want darwin or linux\n", *target)
		return exitcode.Usage
	}
	o := validation.Options{
		Ctx: e.ctx, ConfigDir: e.configDir, StateDir: e.stateDir, StateDirIsDefault: e.stateDir == defaultStateDir,
		Target: t, AsRoot: e.euid() == 0, TriesCake: t == config.TargetLinux && runtime.GOOS == "linux", Invocation: e.invocation(),
	}
	if !o.AsRoot {
		fmt.Fprintln(e.stderr, "note: not running as root: file ownership and mode checks skipped")
	}
	if o.TriesCake && o.AsRoot {
		o.CheckCake = cakeCheckOnThisSystem(e)
	}
	res, err := validation.Run(o)
	if err != nil {
		fmt.Fprintf(e.stderr, "macake validate: interrupted (%v); not every file was checked\n", err)
		return exitcode.Failure
	}
	if res.CakeNotTried {
		fmt.Fprintln(e.stderr, "note: not running as root: the [cake] options are not tried on this kernel and iproute2")
	}
	links, warnings, problems := res.Links, res.Warnings, res.Problems
	code := exitcode.OK
	if len(problems) > 0 {
		code = exitcode.Config
	}
	if *asJSON {
		out, _ := json.MarshalIndent(res.Report(o), "", "  ")
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
		fmt.Fprintf(e.stderr, "macake validate: %s in %s\n", english.Plural(len(problems), "problem"), english.Plural(len(files), "file"))
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
	fmt.Fprintf(e.stdout, "ok: %s (%s)\n", english.Plural(len(links), "link"), strings.Join(names, ", "))
	return code
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
