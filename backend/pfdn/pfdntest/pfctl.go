// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"fmt"
	"strings"
)

// pfctl emulates Apple's /sbin/pfctl (reference §3), whose source is not
// published: behaviour follows the decompiled binary and real captures.
type pfctl struct {
	*process
	anchor      string
	recursive   bool
	quiet       bool
	noAction    bool
	verbose     int
	show        string
	flush       string
	load        string
	loadSet     bool
	enable      bool
	enableRef   bool
	disable     bool
	release     string
	hasRelease  bool
	restrict    []RuleType
	unsupported []byte
}

const pfctlUsage = "usage: pfctl [-AdeghmNnOqRrvz] [-a anchor] [-D macro=value] [-F modifier]\n" +
	"\t[-f file] [-i interface] [-K host | network] [-k host | network]\n" +
	"\t[-o level] [-p device] [-s modifier] [-w interval]\n" +
	"\t[-t table -T command [address ...]] [-x level]\n"

const loadWarning = "Use of -f option, could result in flushing of rules\npresent in the main ruleset added by the system at startup.\nSee /etc/pf.conf for further details.\n"

var showModifiers = []string{"queue", "rules", "Anchors", "Sources", "nat", "states", "info", "Interfaces",
	"labels", "timeouts", "memory", "Tables", "osfp", "all", "dummynet", "References"}

var flushModifiers = []string{"rules", "nat", "queue", "Sources", "states", "info", "Tables", "osfp", "all", "dummynet"}

// takesArg lists pfctl's getopt options that take an argument.
const pfctlArgOpts = "aDfFiKkoprsTtwxX"
const pfctlFlagOpts = "AdeEgGhmMnNOqRrvz"

func runPfctl(p *process) int {
	c := &pfctl{process: p}
	p.progname = "pfctl"
	return p.run(c.main)
}

func (c *pfctl) usage() {
	c.stderr.WriteString(pfctlUsage)
	panic(exit(1))
}

func matchModifier(list []string, arg string) string {
	if arg == "" {
		return ""
	}
	for _, m := range list {
		if strings.HasPrefix(m, arg) {
			return m
		}
	}
	return ""
}

func (c *pfctl) main() int {
	args := c.argv[1:]
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		i++
		for j := 1; j < len(a); j++ {
			opt := a[j]
			var arg string
			if strings.IndexByte(pfctlArgOpts, opt) >= 0 {
				if j+1 < len(a) {
					arg = a[j+1:]
				} else if i < len(args) {
					arg = args[i]
					i++
				} else {
					fmt.Fprintf(&c.stderr, "%s: option requires an argument -- %c\n", c.argv[0], opt)
					c.usage()
				}
				j = len(a)
			} else if strings.IndexByte(pfctlFlagOpts, opt) < 0 {
				fmt.Fprintf(&c.stderr, "%s: illegal option -- %c\n", c.argv[0], opt)
				c.usage()
			}
			c.option(opt, arg)
		}
	}
	if i < len(args) {
		c.warnx("unknown command line argument: %s ...", args[i])
		c.usage()
	}
	return c.execute()
}

func (c *pfctl) option(opt byte, arg string) {
	switch opt {
	case 'a':
		name := arg
		if strings.HasSuffix(name, "/*") {
			name, c.recursive = strings.TrimSuffix(name, "/*"), true
		} else if strings.HasSuffix(name, "*") {
			name, c.recursive = strings.TrimSuffix(name, "*"), true
		}
		if len(name) >= 1024 {
			c.errx(1, "anchor name '%s' too long", name)
		}
		c.anchor = name
	case 'd':
		c.disable = true
	case 'e':
		c.enable = true
	case 'E':
		c.enableRef = true
	case 'q':
		c.quiet = true
	case 'n':
		c.noAction = true
	case 'v':
		c.verbose++
	case 'f':
		// Printed at parse time, for every -f (reference §3.1).
		c.warnx("%s", loadWarning)
		c.load, c.loadSet = arg, true
	case 's':
		m := matchModifier(showModifiers, arg)
		if m == "" {
			c.warnx("Unknown show modifier '%s'", arg)
			c.usage()
		}
		c.show = m
	case 'F':
		m := matchModifier(flushModifiers, arg)
		if m == "" {
			c.warnx("Unknown flush modifier '%s'", arg)
			c.usage()
		}
		c.flush = m
	case 'X':
		if _, rest := strtoul(arg, 0); rest != "" || arg == "" {
			c.warnx("Invalid token value '%s'", arg)
			c.usage()
		}
		c.release, c.hasRelease = arg, true
	case 'N':
		c.restrict = append(c.restrict, TypeNat, TypeRdr, TypeBinat)
	case 'R':
		c.restrict = append(c.restrict, TypeScrub, TypeFilter)
	case 'O', 'A':
		c.restrict = append(c.restrict, "options")
	case 'h':
		c.usage()
	case 'g', 'G', 'r', 'm', 'M':
	default:
		c.unsupported = append(c.unsupported, opt)
	}
}

func (c *pfctl) altqLines() {
	if !c.quiet && !c.m.NoALTQLines {
		c.stderr.WriteString("No ALTQ support in kernel\nALTQ related functions disabled\n")
	}
}

func (c *pfctl) info(format string, args ...any) {
	if !c.quiet {
		fmt.Fprintf(&c.stderr, format+"\n", args...)
	}
}

func (c *pfctl) execute() int {
	now := c.now.Unix()
	if !c.noAction {
		if c.m.Unprivileged {
			c.err(1, "EACCES", "%s", "/dev/pf")
		}
		c.altqLines()
	}
	if len(c.unsupported) > 0 {
		c.errx(1, "option -%c is not emulated", c.unsupported[0])
	}
	if c.disable && !c.noAction {
		if c.m.stop(now) {
			c.errx(1, "pf not enabled")
		}
		c.info("pf disabled")
	}
	if c.hasRelease && !c.noAction {
		tok, _ := strtoul(c.release, 0)
		remaining, errno := c.m.stopRef(tok, now)
		switch errno {
		case "ENOENT":
			c.errx(1, "pf not enabled")
		case "EINVAL":
			c.errx(1, "pf: token invalid")
		}
		if remaining == 0 {
			c.info("pf disabled")
		} else {
			c.info("disable request successful. %d more pf enable reference(s) remaining, pf still enabled.", remaining)
		}
	}
	if c.show != "" {
		c.doShow()
	}
	if c.flush != "" {
		c.doFlush()
	}
	code := 0
	if c.loadSet {
		code = c.doLoad()
	}
	if c.enable && !c.noAction {
		if c.m.start(now) {
			c.errx(1, "pf already enabled")
		}
		c.info("pf enabled")
	}
	if c.enableRef && !c.noAction {
		tok := c.m.startRef(c.pid, "pfctl", c.now)
		if !c.quiet {
			fmt.Fprintf(&c.stderr, "pf enabled\nToken : %d\n", tok)
		}
	}
	return code
}

// ruleset returns the ruleset -a names, or nil when it does not exist.
func (c *pfctl) ruleset() *Ruleset { return c.m.Rulesets[c.anchor] }

func (c *pfctl) printRules(types ...RuleType) {
	rs := c.ruleset()
	if rs == nil {
		c.warn("EINVAL", "DIOCGETRULES")
		return
	}
	for _, t := range types {
		for _, r := range rs.Rules[t] {
			fmt.Fprintf(&c.stdout, "%s\n", r)
			if c.verbose > 0 {
				fmt.Fprintf(&c.stdout, "  [ Evaluations: %-8d  Packets: %-8d  Bytes: %-10d  States: %-6d]\n", r.Evaluations, r.Packets, r.Bytes, 0)
				fmt.Fprintf(&c.stdout, "  [ Inserted: uid %d pid %d ]\n", 0, c.pid)
			}
		}
	}
}

func (c *pfctl) doShow() {
	switch c.show {
	case "rules":
		c.printRules(TypeScrub, TypeFilter)
	case "nat":
		c.printRules(TypeNat, TypeRdr, TypeBinat)
	case "dummynet":
		c.printRules(TypeDummynet)
	case "Anchors":
		c.showAnchors()
	case "info":
		c.showInfo()
	case "References":
		c.showReferences()
	case "all":
		c.stdout.WriteString("TRANSLATION RULES:\n")
		c.printRules(TypeNat, TypeRdr, TypeBinat)
		c.stdout.WriteString("\nFILTER RULES:\n")
		c.printRules(TypeScrub, TypeFilter)
		c.stdout.WriteString("\nDUMMYNET RULES:\n")
		c.printRules(TypeDummynet)
		c.stdout.WriteString("\nINFO:\n")
		c.showInfo()
	case "states", "Sources", "labels", "Tables", "queue":
		// Nothing to list: the emulator keeps no states, tables or ALTQ.
	default:
		c.errx(1, "-s %s is not emulated", c.show)
	}
}

func (c *pfctl) showAnchors() {
	if c.ruleset() == nil {
		fmt.Fprintf(&c.stderr, "Anchor '%s' not found.\n", c.anchor)
		return
	}
	var walk func(path string)
	walk = func(path string) {
		for _, child := range c.m.children(path) {
			name := child[strings.LastIndexByte(child, '/')+1:]
			if strings.HasPrefix(name, "_") && c.verbose == 0 {
				continue
			}
			fmt.Fprintf(&c.stdout, "  %s\n", child)
			if c.verbose > 0 {
				walk(child)
			}
		}
	}
	walk(c.anchor)
}

// statusLine is `pfctl -s info`'s first line.
func (c *pfctl) statusLine() string {
	s := "Status: Disabled"
	if c.m.PF.Enabled {
		d := c.now.Unix() - c.m.PF.Since
		if d < 0 {
			d = 0
		}
		s = fmt.Sprintf("Status: Enabled for %d days %02d:%02d:%02d", d/86400, d%86400/3600, d%3600/60, d%60)
	}
	return fmt.Sprintf("%-44s%15s\n", s, "Debug: Urgent")
}

var infoCounters = []string{"match", "bad-offset", "fragment", "short", "normalize", "memory",
	"bad-timestamp", "congestion", "ip-option", "proto-cksum", "state-mismatch", "state-insert",
	"state-limit", "src-limit", "synproxy", "dummynet", "invalid-port"}

func (c *pfctl) showInfo() {
	c.stdout.WriteString(c.statusLine() + "\n")
	runtime := c.now.Unix() - c.m.PF.Since
	rate := func() string {
		if runtime > 0 {
			return fmt.Sprintf("%14.1f/s\n", 0.0)
		}
		return fmt.Sprintf("%14s\n", "")
	}
	fmt.Fprintf(&c.stdout, "%-27s %14s %16s\n", "State Table", "Total", "Rate")
	fmt.Fprintf(&c.stdout, "  %-25s %14d %14s\n", "current entries", 0, "")
	for _, n := range []string{"searches", "inserts", "removals"} {
		fmt.Fprintf(&c.stdout, "  %-25s %14d %s", n, 0, rate())
	}
	c.stdout.WriteString("Counters\n")
	for _, n := range infoCounters {
		fmt.Fprintf(&c.stdout, "  %-25s %14d %s", n, 0, rate())
	}
}

func (c *pfctl) showReferences() {
	toks := c.m.PF.Tokens
	if len(toks) == 0 {
		c.stdout.WriteString("No pf starter references held\n")
		return
	}
	c.stdout.WriteString("TOKENS:\n")
	fmt.Fprintf(&c.stdout, "%-8s %-28s %-24s %-s\n", "PID", "Process Name", "TOKEN", "TIMESTAMP")
	for i := len(toks) - 1; i >= 0; i-- {
		t := toks[i]
		age := (c.now.UnixNano() - t.Created) / 1e9
		if age < 0 {
			age = 0
		}
		fmt.Fprintf(&c.stdout, "%-8d %-28s %-24d %d days %02d:%02d:%02d\n", t.PID, t.Process, t.Value,
			age/86400, age%86400/3600, age%3600/60, age%60)
	}
}

func (c *pfctl) checkModifiable() {
	for _, part := range strings.Split(c.anchor, "/") {
		if strings.HasPrefix(part, "_") {
			c.errx(1, "anchor names beginning with '_' cannot be modified from the command line")
		}
	}
}

func (c *pfctl) doFlush() {
	c.checkModifiable()
	apply := func(types ...RuleType) {
		if !c.noAction {
			c.m.commit(c.anchor, types, nil, nil, false)
		}
	}
	switch c.flush {
	case "rules":
		apply(TypeScrub, TypeFilter)
		c.info("rules cleared")
	case "nat":
		apply(TypeNat, TypeRdr, TypeBinat)
		c.info("nat cleared")
	case "dummynet":
		apply(TypeDummynet)
		c.info("dummynet cleared")
	case "states":
		c.info("0 states cleared")
	case "Sources":
		c.info("source tracking entries cleared")
	case "info":
		c.info("pf: statistics cleared")
	case "Tables":
		c.info("0 tables deleted.")
	case "queue", "osfp":
	case "all":
		apply(ruleTypes...)
		c.info("rules cleared")
		c.info("nat cleared")
		c.info("dummynet cleared")
		c.info("0 tables deleted.")
		if c.anchor == "" {
			c.info("0 states cleared")
			c.info("source tracking entries cleared")
			c.info("pf: statistics cleared")
			c.info("pf: interface flags reset")
		}
	}
}

// doLoad is -f: parse the file, and unless -n replace the target's rules
// in one transaction. Nothing changes on a parse error.
func (c *pfctl) doLoad() int {
	c.checkModifiable()
	name := c.load
	var text []byte
	if name == "-" {
		name, text = "stdin", c.stdin()
	} else {
		var err error
		if text, err = c.read(name); err != nil {
			c.warn("ENOENT", "%s", name)
			return 1
		}
	}
	main := c.anchor == ""
	parsed, errs := parseConf(string(text), main)
	if !main {
		for _, l := range parsed.loads {
			errs = append(errs, confError{l.line, "syntax error"})
		}
	}
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintf(&c.stderr, "%s:%d: %s\n", name, e.line, e.msg)
		}
		if !c.noAction {
			c.warnx("Syntax error in config file: pf rules not loaded")
		}
		return 1
	}
	if c.verbose > 0 {
		for _, r := range parsed.rules {
			fmt.Fprintf(&c.stdout, "%s\n", r)
		}
		for _, n := range parsed.order {
			if !parsed.used[n] {
				fmt.Fprintf(&c.stderr, "warning: macro '%s' not used\n", n)
			}
		}
	}
	// Load the anchors the main ruleset names before committing anything,
	// so a bad anchor file leaves everything as it was.
	type anchorLoad struct {
		path  string
		rules []Rule
	}
	var anchors []anchorLoad
	for _, l := range parsed.loads {
		if c.verbose > 0 {
			fmt.Fprintf(&c.stderr, "\nLoading anchor %s from %s\n", l.anchor, l.file)
		}
		data, err := c.read(l.file)
		if err != nil {
			c.warn("ENOENT", "%s", l.file)
			c.warnx("load anchors")
			return 1
		}
		sub, subErrs := parseConf(string(data), false)
		if len(subErrs) > 0 {
			for _, e := range subErrs {
				fmt.Fprintf(&c.stderr, "%s:%d: %s\n", l.file, e.line, e.msg)
			}
			c.warnx("load anchors")
			return 1
		}
		anchors = append(anchors, anchorLoad{l.anchor, sub.rules})
	}
	if c.noAction {
		return 0
	}
	types := ruleTypes
	setOptions := main
	if len(c.restrict) > 0 {
		types, setOptions = nil, false
		for _, t := range c.restrict {
			if t == "options" {
				setOptions = main
			} else {
				types = append(types, t)
			}
		}
	}
	rules := make([]Rule, 0, len(parsed.rules))
	for _, r := range parsed.rules {
		keep := false
		for _, t := range types {
			keep = keep || r.Type == t
		}
		if keep {
			rules = append(rules, r)
		}
	}
	c.m.commit(c.anchor, types, rules, parsed.options, setOptions)
	for _, a := range anchors {
		c.m.commit(a.path, ruleTypes, a.rules, nil, false)
	}
	return 0
}
