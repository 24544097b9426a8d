// SPDX-License-Identifier: Apache-2.0

package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/macake/macake/config"
	"github.com/macake/macake/doctor/report"
	"github.com/macake/macake/internal/docsite"
	"github.com/macake/macake/internal/english"
	"github.com/macake/macake/service"
)

func checkPolicies(_ context.Context, in *Inspection) report.Result {
	return judgePolicies(in.config(), in.isTC())
}

// initFix is how to write a first policy into dir: init, which says what
// it detected; every key is explained where a user of the binary can
// read it.
func initFix(dir string) string {
	var inv config.Invocation
	if dir != config.DefaultConfigDir {
		inv.ConfigDir = dir
	}
	return fmt.Sprintf("%s writes a policy for the network you are on (every key: %s)", inv.Command(true, "init"), docsite.Page("CONFIG.md", ""))
}

// judgePolicies checks every policy file as apply and watch read them.
func judgePolicies(c configFacts, linux bool) report.Result {
	if c.dirMissing {
		return warn(initFix(c.dir),
			"no policy directory %s, so nothing is shaped", c.dir)
	}
	var details []string
	for _, p := range c.policyProblems {
		details = append(details, p.Error())
	}
	for _, w := range c.policies.Warnings {
		if w.File != c.policies.SettingsFile {
			details = append(details, w.String())
		}
	}
	const maxShown = 5
	if len(details) > maxShown {
		details = append(details[:maxShown], fmt.Sprintf("… and %d more (see macake validate)", len(details)-maxShown))
	}
	validate := "macake validate"
	if c.dir != "" {
		validate = fmt.Sprintf("macake validate --config-dir %s", c.dir)
	}
	if linux {
		validate += " --target linux"
	}
	files := map[string]bool{}
	for _, p := range c.policyProblems {
		files[p.File] = true
	}
	warnings := 0
	for _, w := range c.policies.Warnings {
		if w.File != c.policies.SettingsFile {
			warnings++
		}
	}
	names := make([]string, len(c.policies.Links))
	for i, l := range c.policies.Links {
		names[i] = l.Name
	}
	switch {
	case len(c.policyProblems) > 0:
		return problem(fmt.Sprintf("`%s` lists every problem with its position; until they are fixed, apply changes nothing and watch keeps each broken file's last good version", validate),
			"%s in %s; valid: %s", english.Plural(len(c.policyProblems), "problem"), english.Plural(len(files), "policy file"), listOrNone(names)).With(details...)
	case len(c.policies.Links) == 0:
		return warn(initFix(c.dir), "no policy files (*.toml) in %s, so nothing is shaped", c.dir)
	case warnings > 0:
		return warn(fmt.Sprintf("see `%s`", validate), "%s valid (%s), with %s", english.Plural(len(names), "policy"), strings.Join(names, ", "), english.Plural(warnings, "warning")).With(details...)
	}
	return ok("%s valid: %s", english.Plural(len(names), "policy"), strings.Join(names, ", "))
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func checkSettings(_ context.Context, in *Inspection) report.Result {
	return judgeSettings(in.config(), in.isPF())
}

// judgeSettings checks macake.toml, which names what macake owns.
func judgeSettings(c configFacts, pf bool) report.Result {
	file := c.policies.SettingsFile
	s := c.policies.Settings
	if len(c.settingsProblems) > 0 {
		var details []string
		for _, p := range c.settingsProblems {
			details = append(details, p.Error())
		}
		return problem(fmt.Sprintf("fix %s (`macake validate` shows every problem); apply and watch refuse to run with it, since it names the anchor and pipe range macake owns", file),
			"%s: %s", file, english.Plural(len(c.settingsProblems), "problem")).With(details...)
	}
	var warnings []string
	for _, w := range c.policies.Warnings {
		if w.File == file {
			warnings = append(warnings, w.String())
		}
	}
	owns := "state in " + c.stateDir
	if pf {
		owns = fmt.Sprintf("anchor %q, pipes %d-%d, state in %s", s.Anchor, s.PipeRange.First, s.PipeRange.Last, c.stateDir)
	}
	if len(warnings) > 0 {
		return warn("see `macake validate`", "%s is valid with %s (%s)", file, english.Plural(len(warnings), "warning"), owns).With(warnings...)
	}
	if !c.settingsPresent {
		return ok("no %s: the defaults apply (%s)", file, owns)
	}
	return ok("%s is valid (%s)", file, owns)
}

func checkOwnership(_ context.Context, in *Inspection) report.Result {
	c := in.config()
	var paths []string
	if !c.dirMissing {
		paths = append(paths, c.dir)
		if entries, err := readDirNames(c.dir); err == nil {
			for _, n := range entries {
				paths = append(paths, filepath.Join(c.dir, n))
			}
		}
	}
	if c.settingsPresent {
		paths = append(paths, c.policies.SettingsFile)
	}
	return judgeOwnership(in.sys.FS, paths, c.stateDir)
}

// judgeOwnership checks, as ssh does for its keys, that root owns the
// configuration and that nobody else can write it: apply and watch run as
// root and refuse files that someone else could have changed. The state
// directory gets the same test, as a warning.
func judgeOwnership(files FS, paths []string, stateDir string) report.Result {
	var bad []string
	for _, p := range paths {
		fi, err := files.Stat(p)
		if err != nil {
			continue
		}
		if why := unsafe(fi); why != "" {
			bad = append(bad, fmt.Sprintf("%s: %s", p, why))
		}
	}
	stateNote := ""
	if fi, err := files.Stat(stateDir); err == nil {
		if why := unsafe(fi); why != "" {
			stateNote = fmt.Sprintf("%s: %s", stateDir, why)
		}
	}
	if len(bad) > 0 {
		if stateNote != "" {
			bad = append(bad, stateNote)
		}
		return problem("sudo chown root FILE and sudo chmod go-w FILE for each (apply and watch refuse them until then)",
			"%s can be changed by someone other than root", english.Plural(len(bad), "configuration path")).With(bad...)
	}
	if stateNote != "" {
		return warn(fmt.Sprintf("sudo chown root %s && sudo chmod go-w %s", stateDir, stateDir),
			"the state directory can be changed by someone other than root").With(stateNote)
	}
	if len(paths) == 0 {
		return ok("no configuration files to check")
	}
	return ok("the configuration (%s) is owned by root and not writable by group or others", english.Plural(len(paths), "path"))
}

// unsafe says why a path must not be trusted, or "".
func unsafe(fi service.FileInfo) string {
	if fi.UID > 0 {
		return fmt.Sprintf("owned by uid %d, not root", fi.UID)
	}
	if perm := fi.Mode.Perm(); perm&0o022 != 0 {
		return fmt.Sprintf("writable by group or others (mode %04o)", perm)
	}
	return ""
}

// readDirNames lists the policy files of dir as config.Load picks them:
// *.toml, not hidden.
func readDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".toml") && !strings.HasPrefix(n, ".") {
			names = append(names, n)
		}
	}
	return names, nil
}

func checkState(_ context.Context, in *Inspection) report.Result {
	return judgeState(in.state(), in.sys.EUID, in.isPF())
}

// judgeState checks that the state file is readable; a corrupt one is
// rebuilt, never a crash, but what it held is lost. pf says the backend
// is pf's, whose words it uses; else tc's.
func judgeState(s stateFacts, euid int, pf bool) report.Result {
	switch {
	case s.corrupt:
		rebuilt := "link slots are rebuilt from the live qdiscs"
		if pf {
			rebuilt = "pipe slots are rebuilt from the live rules, the pf reference is taken anew"
		}
		return warn("nothing to do by hand: the next apply or watch replaces it; run `macake measure` again to restore the measured profiles",
			"%s is corrupt; apply and watch start from an empty state: %s, and measured capacities and known-good rates are lost", s.path, rebuilt).With(s.err.Error())
	case errors.Is(s.err, fs.ErrPermission) && euid != 0:
		return needsRoot(fmt.Sprintf("cannot read %s without root", s.path), "the state file")
	case s.err != nil:
		return problem("check the state directory's permissions; apply and watch cannot save their state", "cannot read %s: %v", s.path, s.err)
	case !s.exists:
		return ok("no state file yet at %s (the first apply or measure writes it)", s.path)
	}
	st := s.state
	links := st.LinkNames()
	var profiles []string
	for k := range st.Profiles {
		profiles = append(profiles, k)
	}
	sort.Strings(profiles)
	var details []string
	if len(profiles) > 0 {
		details = append(details, "profiles: "+strings.Join(profiles, ", "))
	}
	held := english.Plural(len(st.TCOwnedRoots), "root qdisc") + " of macake's"
	switch {
	case pf && st.PFToken != "":
		held = "a pf reference"
	case pf:
		held = "no pf reference"
	}
	return ok("%s is readable: %s, %s, %s", s.path, english.Plural(len(links), "link slot"), english.Plural(len(st.Profiles), "measured profile"), held).With(details...)
}
