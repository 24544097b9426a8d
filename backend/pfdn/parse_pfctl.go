// SPDX-License-Identifier: Apache-2.0

package pfdn

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/internal/lazyregexp"
)

// The stderr lines pfctl prints on every non-quiet call that opens
// /dev/pf, because macOS has no ALTQ (reference §3.1, §3.2). Some captures
// lack them, so they are accepted and dropped either way.
const (
	altqLine1 = "No ALTQ support in kernel"
	altqLine2 = "ALTQ related functions disabled"
)

// Messages with a meaning for macake (reference §3.2, §3.3).
const (
	msgNoRules      = "pfctl: DIOCGETRULES: Invalid argument"
	msgNoReferences = "No pf starter references held"
	msgNotEnabled   = "pfctl: pf not enabled"
	msgTokenInvalid = "pfctl: pf: token invalid"
	msgPermission   = "Permission denied"
	msgPipeMissing  = "setsockopt(IP_DUMMYNET_DEL): Invalid argument"
	msgSocketDenied = "dnctl: socket: Operation not permitted"
)

// ErrUnavailable marks failures that mean pf or dummynet cannot be used at
// all: the tool is missing, or the caller lacks the privileges. It matches
// backend.ErrUnavailable, which the CLI maps to exit code 69. The refusals
// of a caller who is not root (pfctl cannot open /dev/pf, dnctl its raw
// socket; on macOS even reading needs root) match backend.ErrNeedsRoot too.
var ErrUnavailable error = unavailableError{}

type unavailableError struct{}

func (unavailableError) Error() string        { return "pf/dummynet unavailable" }
func (unavailableError) Is(target error) bool { return target == backend.ErrUnavailable }

// stderrLines splits stderr into its non-empty lines, without the ALTQ
// notices.
func stderrLines(stderr []byte) []string {
	var out []string
	for _, l := range strings.Split(string(stderr), "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) == "" || l == altqLine1 || l == altqLine2 {
			continue
		}
		out = append(out, l)
	}
	return out
}

// Rule is one line of `pfctl -s dummynet` output.
type Rule struct {
	// Text is the rule with its whitespace normalised.
	Text string
	// Action is "dummynet", "no dummynet" or "dummynet-anchor".
	Action string
	// Anchor is the anchor a dummynet-anchor rule evaluates.
	Anchor string
	// Direction is "in", "out" or "" (both).
	Direction string
	// Interface is the interface of `on IF`, "" when the rule has none.
	Interface string
	// Pipe is the pipe a dummynet rule sends to, 0 for none.
	Pipe int
}

// RuleList is the parsed output of `pfctl [-a ANCHOR] -s dummynet`.
type RuleList struct {
	// Exists is false when pfctl answered `DIOCGETRULES: Invalid
	// argument`: the anchor does not exist (pfctl still exits 0).
	Exists bool
	Rules  []Rule
	// Warnings are stderr lines pfctl printed that mean nothing to macake.
	Warnings []string
}

// Texts returns the rules' normalised text.
func (l RuleList) Texts() []string {
	out := make([]string, len(l.Rules))
	for i, r := range l.Rules {
		out[i] = r.Text
	}
	return out
}

// ParseRules parses `pfctl [-a ANCHOR] -s dummynet`. Show commands exit 0
// even when they fail, so success is judged from stderr. A line that is
// not a dummynet rule is an error: macake never plans from output it does
// not understand.
func ParseRules(stdout, stderr []byte) (RuleList, error) {
	list := RuleList{Exists: true}
	for _, l := range stderrLines(stderr) {
		switch {
		case l == msgNoRules:
			list.Exists = false
		case strings.Contains(l, msgPermission):
			return RuleList{}, fmt.Errorf("%w: %s", ErrUnavailable, l)
		default:
			list.Warnings = append(list.Warnings, "pfctl: "+strings.TrimPrefix(l, "pfctl: "))
		}
	}
	for i, line := range splitLines(stdout) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "  [ ") { // -v counters under the previous rule
			continue
		}
		r, err := parseRule(line)
		if err != nil {
			return RuleList{}, fmt.Errorf("pfctl -s dummynet output, line %d: %w", i+1, err)
		}
		list.Rules = append(list.Rules, r)
	}
	if !list.Exists && len(list.Rules) > 0 {
		return RuleList{}, errors.New("pfctl -s dummynet printed rules and also said the anchor does not exist")
	}
	return list, nil
}

// NormalizeRule collapses whitespace and spells protocol 58 the way pfctl
// prints it, so rules written by hand and rules read back compare equal.
func NormalizeRule(s string) string {
	f := strings.Fields(s)
	for i := 1; i < len(f); i++ {
		if f[i-1] == "proto" && f[i] == "icmp6" {
			f[i] = "ipv6-icmp"
		}
	}
	return strings.Join(f, " ")
}

func parseRule(line string) (Rule, error) {
	text := NormalizeRule(line)
	f := strings.Fields(text)
	r := Rule{Text: text}
	rest := f
	switch {
	case len(f) >= 2 && f[0] == "dummynet-anchor":
		r.Action = "dummynet-anchor"
		name, err := strconv.Unquote(f[1])
		if err != nil {
			return Rule{}, fmt.Errorf("dummynet-anchor with a malformed name: %q", line)
		}
		r.Anchor = name
		rest = f[2:]
	case len(f) >= 1 && f[0] == "dummynet":
		r.Action = "dummynet"
		rest = f[1:]
	case len(f) >= 2 && f[0] == "no" && f[1] == "dummynet":
		r.Action = "no dummynet"
		rest = f[2:]
	default:
		return Rule{}, fmt.Errorf("not a dummynet rule: %q", line)
	}
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case "in", "out":
			if i == 0 {
				r.Direction = rest[i]
			}
		case "on":
			if i+1 < len(rest) && rest[i+1] != "!" {
				r.Interface = rest[i+1]
			}
		case "pipe":
			if i+1 < len(rest) {
				if n, err := strconv.Atoi(rest[i+1]); err == nil {
					r.Pipe = n
				}
			}
		}
	}
	return r, nil
}

// Info is the part of `pfctl -s info` macake uses.
type Info struct {
	// Enabled tells whether pf is running.
	Enabled bool
	// For is how long pf has been enabled (or disabled, on some versions).
	For time.Duration
	// Warnings are lines that did not look like `pfctl -s info` output.
	Warnings []string
}

var (
	statusEnabled = lazyregexp.New(`^Status: Enabled for (\d+) days (\d+):(\d+):(\d+)\s+(Debug: \S+)?$`)
	statusOther   = lazyregexp.New(`^Status: (Disabled|Enabled)\s*(Debug: \S+)?$`)
	infoCounter   = lazyregexp.New(`^  \S.*\s\d+\s*(\d+\.\d/s)?$`)
	infoHeading   = lazyregexp.New(`^(State Table|Source Tracking Table|Counters|Limit Counters|Interface Stats for|Hostid:|Checksum:)`)
)

// ParseInfo parses `pfctl -s info`. The Status line is required; any other
// line must look like a counter or a heading, or it becomes a warning.
func ParseInfo(stdout, stderr []byte) (Info, error) {
	var info Info
	found := false
	for _, l := range stderrLines(stderr) {
		if strings.Contains(l, msgPermission) {
			return Info{}, fmt.Errorf("%w: %s", ErrUnavailable, l)
		}
		info.Warnings = append(info.Warnings, "pfctl: "+strings.TrimPrefix(l, "pfctl: "))
	}
	for i, line := range splitLines(stdout) {
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "Status: "):
			if found {
				return Info{}, fmt.Errorf("pfctl -s info output, line %d: a second Status line: %q", i+1, line)
			}
			found = true
			if m := statusEnabled.FindStringSubmatch(line); m != nil {
				info.Enabled = true
				d, _ := strconv.Atoi(m[1])
				h, _ := strconv.Atoi(m[2])
				mi, _ := strconv.Atoi(m[3])
				s, _ := strconv.Atoi(m[4])
				info.For = time.Duration(((d*24+h)*60+mi)*60+s) * time.Second
			} else if m := statusOther.FindStringSubmatch(line); m != nil {
				info.Enabled = m[1] == "Enabled"
			} else {
				return Info{}, fmt.Errorf("pfctl -s info output, line %d: unrecognised status: %q", i+1, line)
			}
		case infoHeading.MatchString(line), infoCounter.MatchString(line):
		default:
			info.Warnings = append(info.Warnings, fmt.Sprintf("pfctl -s info output, line %d: unrecognised: %q", i+1, line))
		}
	}
	if !found {
		return Info{}, errors.New("pfctl -s info printed no Status line; cannot tell whether pf is enabled")
	}
	return info, nil
}

// Reference is one pf enable reference (a pfctl -E token holder).
type Reference struct {
	PID     int
	Process string
	Token   string
	// Age is how long ago the token was taken.
	Age time.Duration
}

var (
	referenceRow    = lazyregexp.New(`^(\d+)\s+(.*?)\s+(\d+)\s+(\d+) days (\d+):(\d+):(\d+)$`)
	referenceHeader = lazyregexp.New(`^PID\s+Process Name\s+TOKEN\s+TIMESTAMP$`)
)

// ParseReferences parses `pfctl -s References`: either
// `No pf starter references held` or a TOKENS table. Any other stdout line
// is an error, because macake decides from this list whether its own token
// is still valid; stderr lines that mean nothing are returned as warnings.
func ParseReferences(stdout, stderr []byte) (refs []Reference, warnings []string, err error) {
	none := false
	for _, l := range stderrLines(stderr) {
		switch {
		case l == msgNoReferences || l == "pfctl: "+msgNoReferences:
			none = true
		case strings.Contains(l, msgPermission):
			return nil, nil, fmt.Errorf("%w: %s", ErrUnavailable, l)
		default:
			warnings = append(warnings, "pfctl: "+strings.TrimPrefix(l, "pfctl: "))
		}
	}
	for i, line := range splitLines(stdout) {
		line = strings.TrimRight(line, " ")
		switch {
		case line == "":
		case line == msgNoReferences:
			none = true
		case line == "TOKENS:", referenceHeader.MatchString(line):
		default:
			m := referenceRow.FindStringSubmatch(line)
			if m == nil {
				return nil, nil, fmt.Errorf("pfctl -s References output, line %d: unrecognised: %q", i+1, line)
			}
			pid, _ := strconv.Atoi(m[1])
			d, _ := strconv.Atoi(m[4])
			h, _ := strconv.Atoi(m[5])
			mi, _ := strconv.Atoi(m[6])
			s, _ := strconv.Atoi(m[7])
			refs = append(refs, Reference{
				PID: pid, Process: m[2], Token: m[3],
				Age: time.Duration(((d*24+h)*60+mi)*60+s) * time.Second,
			})
		}
	}
	if none && len(refs) > 0 {
		return nil, nil, errors.New("pfctl -s References listed tokens and also said none are held")
	}
	return refs, warnings, nil
}

var tokenLine = lazyregexp.New(`(?m)^Token : (\d+)\s*$`)

// ParseEnableToken returns the token `pfctl -E` printed on stderr
// (`Token : 11012949885072952621`).
func ParseEnableToken(stderr []byte) (string, error) {
	m := tokenLine.FindSubmatch(stderr)
	if m == nil {
		return "", fmt.Errorf("pfctl -E printed no token (stderr: %q)", strings.TrimSpace(string(stderr)))
	}
	tok := string(m[1])
	if _, err := strconv.ParseUint(tok, 10, 64); err != nil {
		return "", fmt.Errorf("pfctl -E printed a token that is not a 64-bit number: %q", tok)
	}
	return tok, nil
}

// splitLines splits output into lines without the final empty one.
func splitLines(b []byte) []string {
	b = bytes.TrimSuffix(b, []byte("\n"))
	if len(b) == 0 {
		return nil
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// ErrAnchorMissing is ParseAnchors' answer for an anchor that does not
// exist (pfctl says so on stderr and exits 0).
var ErrAnchorMissing = errors.New("anchor not found")

// ParseAnchors parses `pfctl [-a ANCHOR] -s Anchors`: one child per line,
// two spaces then its full path, in name order. A missing anchor answers
// "Anchor 'X' not found." on stderr (exit 0), reported as ErrAnchorMissing.
// Any other stdout line is an error: callers judge other tools' anchors
// from this list and must not guess.
func ParseAnchors(stdout, stderr []byte) ([]string, error) {
	for _, l := range strings.Split(string(stderr), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "", l == "No ALTQ support in kernel", l == "ALTQ related functions disabled":
		case strings.HasPrefix(l, "Anchor '") && strings.HasSuffix(l, "' not found."):
			return nil, ErrAnchorMissing
		case strings.Contains(l, "Permission denied"):
			return nil, fmt.Errorf("%w: %s", ErrUnavailable, l)
		}
	}
	var out []string
	for i, line := range strings.Split(string(stdout), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		path, found := strings.CutPrefix(line, "  ")
		if !found || path == "" || strings.ContainsAny(path, " \t\"") {
			return nil, fmt.Errorf("pfctl -s Anchors output, line %d: not an anchor path: %q", i+1, line)
		}
		out = append(out, path)
	}
	return out, nil
}
