// SPDX-License-Identifier: Apache-2.0

package pfcheck

import (
	"strconv"
	"strings"

	"github.com/macake/macake/internal/lazyregexp"
	"github.com/macake/macake/selftest/check"
)

// The normalizers replace, on both sides alike, exactly what may rightly
// differ between this Mac and a freshly booted emulator: pf tokens, pids
// and ages, pf's uptime and counters, other tools' objects in a listing.
// Everything else is compared byte for byte.

// The two ALTQ lines pfctl prints on stderr (reference §3.2). macake
// accepts stderr with or without them; pfctl.altq checks which is true.
const (
	altq1 = "No ALTQ support in kernel\n"
	altq2 = "ALTQ related functions disabled\n"
)

var noALTQ = check.Normalizer{Name: "without the ALTQ lines", Apply: func(a check.Answer, _ check.Vars) check.Answer {
	a.Stderr = strings.Replace(strings.Replace(a.Stderr, altq1, "", 1), altq2, "", 1)
	return a
}}

var onlyStderr = check.Normalizer{Name: "stderr only", Apply: func(a check.Answer, _ check.Vars) check.Answer {
	a.Stdout = ""
	return a
}}

var tokenRE = lazyregexp.New(`(?m)^Token : \d+$`)

var tokens = check.Normalizer{Name: "pf token values", Apply: func(a check.Answer, _ check.Vars) check.Answer {
	a.Stderr = tokenRE.ReplaceAllString(a.Stderr, "Token : <TOKEN>")
	return a
}}

// referenceRowRE is a TOKENS row: "%-8s %-28s %-24s %-s" of pid, process
// name, token and age (reference §3.3).
var referenceRowRE = lazyregexp.New(`(?m)^\d+( +)(.*?) +\d+ +\d+ days \d\d:\d\d:\d\d$`)

var referenceRows = check.Normalizer{Name: "pids, tokens and ages of references", Apply: func(a check.Answer, _ check.Vars) check.Answer {
	a.Stdout = referenceRowRE.ReplaceAllString(a.Stdout, "<PID> $2 <TOKEN> <AGE>")
	return a
}}

var uptimeRE = lazyregexp.New(`Status: Enabled for \d+ days \d\d:\d\d:\d\d +`)

// counterRowRE is a `pfctl -s info` counter row: "  %-25s %14llu " and a
// rate or padding.
var counterRowRE = lazyregexp.New(`(?m)^  (\S(?:.*\S)?) +\d+ +(?:\d+\.\d/s)? *$`)

var infoValues = check.Normalizer{Name: "pf's uptime and counter values", Apply: func(a check.Answer, _ check.Vars) check.Answer {
	a.Stdout = uptimeRE.ReplaceAllString(a.Stdout, "Status: Enabled for <UPTIME> ")
	a.Stdout = counterRowRE.ReplaceAllString(a.Stdout, "  $1 <N>")
	return a
}}

// firstLine keeps stdout's first line (the Status line of `-s info`).
var firstLine = check.Normalizer{Name: "first line only", Apply: func(a check.Answer, _ check.Vars) check.Answer {
	if i := strings.IndexByte(a.Stdout, '\n'); i >= 0 {
		a.Stdout = a.Stdout[:i+1]
	}
	return a
}}

// onlyLinesWith keeps the stdout lines that contain text (other tools'
// rules and anchors are not the emulator's to know).
func onlyLinesWith(what, text string) check.Normalizer {
	return check.Normalizer{Name: "only lines with " + what, Apply: func(a check.Answer, v check.Vars) check.Answer {
		want := expand(text, v)
		var keep strings.Builder
		for _, l := range strings.SplitAfter(a.Stdout, "\n") {
			if strings.Contains(l, want) {
				keep.WriteString(l)
			}
		}
		a.Stdout = keep.String()
		return a
	}}
}

// pipeLineRE starts a pipe's section of `dnctl list`; queueLineRE a flow
// set's. Everything up to the next such line belongs to the section.
var (
	pipeLineRE  = lazyregexp.New(`^(\d{5,}): `)
	queueLineRE = lazyregexp.New(`^q\d{5,}: `)
)

// onlyPipes keeps the sections of the scratch pipes named by vars, in
// listing order (other tools' pipes and flow sets are not compared).
func onlyPipes(vars ...string) check.Normalizer {
	return check.Normalizer{Name: "only the scratch pipes", Apply: func(a check.Answer, v check.Vars) check.Answer {
		want := map[int]bool{}
		for _, name := range vars {
			if n, err := strconv.Atoi(v[name]); err == nil {
				want[n] = true
			}
		}
		a.Stdout = strings.Join(pipeSections(a.Stdout, want), "")
		return a
	}}
}

// pipeSections returns the sections of the wanted pipes, in order.
func pipeSections(listing string, want map[int]bool) []string {
	var out []string
	keep := false
	var cur strings.Builder
	flush := func() {
		if keep {
			out = append(out, cur.String())
		}
		cur.Reset()
	}
	for _, l := range strings.SplitAfter(listing, "\n") {
		if m := pipeLineRE.FindStringSubmatch(l); m != nil {
			flush()
			n, _ := strconv.Atoi(m[1])
			keep = want[n]
		} else if queueLineRE.MatchString(l) {
			flush()
			keep = false
		}
		cur.WriteString(l)
	}
	flush()
	return out
}

// flowRowRE is an IPv4 flow row of `dnctl list` (reference §1.7):
// bucket, protocol, source/port, destination/port, then the counters.
var flowRowRE = lazyregexp.New(`(?m)^ *\d+ (\S+) +(\S+)/\d+ +(\S+)/(\d+) +\d+ +\d+ +\d+ +\d+ +\d+$`)

var flowCounters = check.Normalizer{Name: "flow source ports and counters", Apply: func(a check.Answer, _ check.Vars) check.Answer {
	a.Stdout = flowRowRE.ReplaceAllString(a.Stdout, "<BKT> $1 $2/<PORT> $3/$4 <PKTS> <BYTES> <QLEN> <QBYTES> <DROPS>")
	return a
}}

// expand fills {name} placeholders in a normalizer's text.
func expand(text string, v check.Vars) string {
	for k, val := range v {
		text = strings.ReplaceAll(text, "{"+k+"}", val)
	}
	return text
}
