// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// RuleType is one of the rule lists a pf ruleset keeps.
type RuleType string

// The rule lists of a ruleset. `pfctl -s rules` prints scrub then filter,
// `-s nat` prints nat, rdr, binat, and `-s dummynet` the dummynet list.
const (
	TypeScrub    RuleType = "scrub"
	TypeFilter   RuleType = "filter"
	TypeNat      RuleType = "nat"
	TypeRdr      RuleType = "rdr"
	TypeBinat    RuleType = "binat"
	TypeDummynet RuleType = "dummynet"
)

// ruleTypes is the order rule lists are kept and compared in.
var ruleTypes = []RuleType{TypeScrub, TypeFilter, TypeNat, TypeRdr, TypeBinat, TypeDummynet}

// pfError is one of pfctl's parse messages, verbatim (some start with a
// capital letter, as pfctl prints them).
type pfError string

func (e pfError) Error() string { return string(e) }

// Addr is one side of a rule's from/to: any, or an address or prefix,
// possibly negated, with an optional port condition.
type Addr struct {
	Not    bool         `json:"not,omitempty"`
	Prefix netip.Prefix `json:"prefix,omitzero"`
	// PortOp is "", "=", "!=", "<", "<=", ">", ">=", ":", "><" or "<>".
	PortOp string `json:"port_op,omitempty"`
	Port1  int    `json:"port1,omitempty"`
	Port2  int    `json:"port2,omitempty"`
}

func (a Addr) any() bool { return !a.Prefix.IsValid() && !a.Not && a.PortOp == "" }

// Rule is one expanded pf rule as the kernel holds it.
type Rule struct {
	Type RuleType `json:"type"`
	// Action is the action word as printed: "pass", "block drop",
	// "dummynet", "no dummynet", "scrub", "nat", "anchor",
	// "dummynet-anchor", …
	Action string `json:"action"`
	// Anchor is the anchor name of an anchor rule, as written.
	Anchor    string `json:"anchor,omitempty"`
	Direction string `json:"dir,omitempty"`
	Log       bool   `json:"log,omitempty"`
	Quick     bool   `json:"quick,omitempty"`
	Interface string `json:"if,omitempty"`
	IfNot     bool   `json:"if_not,omitempty"`
	AF        string `json:"af,omitempty"`
	Proto     string `json:"proto,omitempty"`
	From      Addr   `json:"from"`
	To        Addr   `json:"to"`
	// Options holds the printed filter options in print order, keyed by
	// position (flags, icmp-type, state, probability, fragment, ...).
	Flags       string `json:"flags,omitempty"`
	ICMPType    string `json:"icmp_type,omitempty"`
	State       string `json:"state,omitempty"`
	Probability string `json:"probability,omitempty"`
	Fragment    string `json:"fragment,omitempty"`
	AllowOpts   bool   `json:"allow_opts,omitempty"`
	Label       string `json:"label,omitempty"`
	// PipeKind is "pipe" or "queue" for dummynet rules; Pipe the number.
	PipeKind string `json:"pipe_kind,omitempty"`
	Pipe     int    `json:"pipe,omitempty"`
	Tag      string `json:"tag,omitempty"`
	Tagged   string `json:"tagged,omitempty"`
	Redirect string `json:"redirect,omitempty"`
	// Counters, shown by -v; a reload makes new rules, so they reset.
	Evaluations uint64 `json:"evaluations,omitempty"`
	Packets     uint64 `json:"packets,omitempty"`
	Bytes       uint64 `json:"bytes,omitempty"`
}

// String prints the rule the way Apple's pfctl does (reference §3.4).
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString(r.Action)
	if r.Anchor != "" {
		fmt.Fprintf(&b, " %q", r.Anchor)
	}
	if r.Direction != "" {
		b.WriteString(" " + r.Direction)
	}
	if r.Log {
		b.WriteString(" log")
	}
	if r.Quick {
		b.WriteString(" quick")
	}
	if r.Interface != "" {
		b.WriteString(" on ")
		if r.IfNot {
			b.WriteString("! ")
		}
		b.WriteString(r.Interface)
	}
	if r.AF != "" {
		b.WriteString(" " + r.AF)
	}
	if r.Proto != "" {
		b.WriteString(" proto " + r.Proto)
	}
	if r.From.any() && r.To.any() {
		b.WriteString(" all")
	} else {
		b.WriteString(" from ")
		writeAddr(&b, r.From)
		b.WriteString(" to ")
		writeAddr(&b, r.To)
	}
	if r.Flags != "" {
		b.WriteString(" flags " + r.Flags)
	}
	if r.ICMPType != "" {
		b.WriteString(" icmp-type " + r.ICMPType)
	}
	if r.State != "" {
		b.WriteString(" " + r.State)
	}
	if r.Probability != "" {
		b.WriteString(" probability " + r.Probability)
	}
	if r.Fragment != "" {
		b.WriteString(" " + r.Fragment)
	}
	if r.AllowOpts {
		b.WriteString(" allow-opts")
	}
	// A labelled dummynet rule prints its label instead of its pipe
	// (reference §3.4 item 19, read from decompiled control flow).
	if r.Label != "" {
		fmt.Fprintf(&b, " label %q", r.Label)
	} else if r.Type == TypeDummynet && r.Pipe != 0 {
		fmt.Fprintf(&b, " %s %d", r.PipeKind, r.Pipe)
	}
	if r.Tag != "" {
		b.WriteString(" tag " + r.Tag)
	}
	if r.Tagged != "" {
		b.WriteString(" tagged " + r.Tagged)
	}
	if r.Redirect != "" {
		b.WriteString(" -> " + r.Redirect)
	}
	return b.String()
}

func writeAddr(b *strings.Builder, a Addr) {
	if a.Not {
		b.WriteString("! ")
	}
	if !a.Prefix.IsValid() {
		b.WriteString("any")
	} else if a.Prefix.IsSingleIP() {
		b.WriteString(a.Prefix.Addr().String())
	} else {
		b.WriteString(a.Prefix.String())
	}
	switch a.PortOp {
	case "":
	case ":":
		fmt.Fprintf(b, " port %d:%d", a.Port1, a.Port2)
	case "><", "<>":
		fmt.Fprintf(b, " port %d %s %d", a.Port1, a.PortOp, a.Port2)
	default:
		fmt.Fprintf(b, " port %s %d", a.PortOp, a.Port1)
	}
}

// isAnchorRule reports whether r evaluates another ruleset.
func (r Rule) isAnchorRule() bool { return r.Anchor != "" }

// protocols maps the names pfctl accepts to the name it prints (from
// /etc/protocols: protocol 58's official name is ipv6-icmp, so a rule
// written with icmp6 prints back as ipv6-icmp; inferred, unverified).
var protocols = map[string]string{
	"ip": "ip", "icmp": "icmp", "igmp": "igmp", "tcp": "tcp", "udp": "udp",
	"gre": "gre", "esp": "esp", "ah": "ah", "icmp6": "ipv6-icmp", "ipv6-icmp": "ipv6-icmp",
	"ipv6": "ipv6", "sctp": "sctp", "pim": "pim", "carp": "carp", "pfsync": "pfsync",
}

var protocolNumbers = map[int]string{1: "icmp", 2: "igmp", 6: "tcp", 17: "udp", 47: "gre", 50: "esp", 51: "ah", 58: "ipv6-icmp", 132: "sctp"}

var services = map[string]int{
	"ftp": 21, "ssh": 22, "telnet": 23, "smtp": 25, "domain": 53, "http": 80, "www": 80,
	"pop3": 110, "ntp": 123, "imap": 143, "https": 443, "submission": 587, "imaps": 993,
}

// lexer for the pf.conf subset. Words, quoted strings and the punctuation
// pf treats as separate tokens.
type token struct {
	text   string
	quoted bool
}

func lex(line string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(line) {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				return nil, pfError("syntax error")
			}
			toks = append(toks, token{text: line[i+1 : i+1+j], quoted: true})
			i += j + 2
		case strings.IndexByte("{},()", c) >= 0:
			toks = append(toks, token{text: string(c)})
			i++
		case c == '!':
			if i+1 < len(line) && line[i+1] == '=' {
				toks = append(toks, token{text: "!="})
				i += 2
			} else {
				toks = append(toks, token{text: "!"})
				i++
			}
		case c == '<' || c == '>' || c == '=':
			j := i + 1
			for j < len(line) && strings.IndexByte("<>=", line[j]) >= 0 {
				j++
			}
			toks = append(toks, token{text: line[i:j]})
			i = j
		case c == '-' && i+1 < len(line) && line[i+1] == '>':
			toks = append(toks, token{text: "->"})
			i += 2
		default:
			j := i
			for j < len(line) && strings.IndexByte(" \t\r\"{},()!<>=", line[j]) < 0 {
				if line[j] == '-' && j+1 < len(line) && line[j+1] == '>' {
					break
				}
				j++
			}
			toks = append(toks, token{text: line[i:j]})
			i = j
		}
	}
	return toks, nil
}

// parsedFile is the result of parsing one pf.conf text.
type parsedFile struct {
	rules   []Rule
	options []string
	loads   []loadAnchor
	macros  map[string]string
	used    map[string]bool
	order   []string // macro definition order
}

type loadAnchor struct {
	anchor, file string
	line         int
}

// confError is one parse error with its line.
type confError struct {
	line int
	msg  string
}

// parseConf parses a pf.conf text in the subset the emulator knows. It
// returns every error it finds (pfctl reports each bad line), or the rules.
func parseConf(text string, main bool) (parsedFile, []confError) {
	pf := parsedFile{macros: map[string]string{}, used: map[string]bool{}}
	var errs []confError
	lastClass := 0
	lines := logicalLines(text)
	for _, ll := range lines {
		line := stripComment(ll.text)
		if strings.TrimSpace(line) == "" {
			continue
		}
		expanded, err := pf.expand(line)
		if err != nil {
			errs = append(errs, confError{ll.line, err.Error()})
			continue
		}
		toks, err := lex(expanded)
		if err != nil || len(toks) == 0 {
			errs = append(errs, confError{ll.line, "syntax error"})
			continue
		}
		if len(toks) >= 2 && toks[1].text == "=" && !toks[0].quoted {
			if len(toks) != 3 {
				errs = append(errs, confError{ll.line, "syntax error"})
				continue
			}
			if _, dup := pf.macros[toks[0].text]; !dup {
				pf.order = append(pf.order, toks[0].text)
			}
			pf.macros[toks[0].text] = toks[2].text
			continue
		}
		if toks[0].text == "set" {
			if lastClass > 0 {
				errs = append(errs, confError{ll.line, "Rules must be in order: options, normalization, queueing, translation, filtering"})
				continue
			}
			if main {
				pf.options = append(pf.options, expanded)
			}
			continue
		}
		if toks[0].text == "load" {
			if len(toks) != 5 || toks[1].text != "anchor" || toks[3].text != "from" {
				errs = append(errs, confError{ll.line, "syntax error"})
				continue
			}
			pf.loads = append(pf.loads, loadAnchor{anchor: toks[2].text, file: toks[4].text, line: ll.line})
			continue
		}
		rules, err := parseRuleLine(toks)
		if err != nil {
			errs = append(errs, confError{ll.line, err.Error()})
			continue
		}
		class := ruleClass(rules[0].Type)
		if class < lastClass {
			errs = append(errs, confError{ll.line, "Rules must be in order: options, normalization, queueing, translation, filtering"})
			continue
		}
		lastClass = class
		pf.rules = append(pf.rules, rules...)
	}
	return pf, errs
}

// ruleClass orders rule types the way pf.conf must list them; dummynet
// rules sit between translation and filtering (reference §3.5).
func ruleClass(t RuleType) int {
	switch t {
	case TypeScrub:
		return 1
	case TypeNat, TypeRdr, TypeBinat:
		return 3
	case TypeDummynet:
		return 4
	}
	return 5
}

type logicalLine struct {
	line int
	text string
}

// logicalLines joins backslash continuations, keeping the first line's number.
func logicalLines(text string) []logicalLine {
	var out []logicalLine
	raw := strings.Split(text, "\n")
	for i := 0; i < len(raw); i++ {
		start := i + 1
		cur := raw[i]
		for strings.HasSuffix(cur, "\\") && i+1 < len(raw) {
			i++
			cur = strings.TrimSuffix(cur, "\\") + " " + raw[i]
		}
		out = append(out, logicalLine{start, strings.TrimSuffix(cur, "\\")})
	}
	return out
}

func stripComment(s string) string {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case '#':
			if !inQuote {
				return s[:i]
			}
		}
	}
	return s
}

// expand replaces $macro references outside quotes.
func (pf *parsedFile) expand(s string) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
			j++
		}
		name := s[i+1 : j]
		v, ok := pf.macros[name]
		if !ok {
			return "", fmt.Errorf("macro '%s' not defined", name)
		}
		pf.used[name] = true
		b.WriteString(v)
		i = j - 1
	}
	return b.String(), nil
}

// ruleParser walks one rule's tokens.
type ruleParser struct {
	toks []token
	pos  int
}

func (p *ruleParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos].text
	}
	return ""
}

func (p *ruleParser) next() (token, bool) {
	if p.pos < len(p.toks) {
		p.pos++
		return p.toks[p.pos-1], true
	}
	return token{}, false
}

func (p *ruleParser) accept(words ...string) bool {
	for _, w := range words {
		if p.peek() == w && p.pos < len(p.toks) && !p.toks[p.pos].quoted {
			p.pos++
			return true
		}
	}
	return false
}

// list reads one item or a { a b , c } list.
func (p *ruleParser) list() ([]token, error) {
	if !p.accept("{") {
		t, ok := p.next()
		if !ok {
			return nil, pfError("syntax error")
		}
		return []token{t}, nil
	}
	var items []token
	for {
		t, ok := p.next()
		if !ok {
			return nil, pfError("syntax error")
		}
		switch t.text {
		case "}":
			if len(items) == 0 {
				return nil, pfError("syntax error")
			}
			return items, nil
		case ",":
		default:
			items = append(items, t)
		}
	}
}

type hostSpec struct {
	addrs []Addr // one per list entry; empty means any
	ports []Addr // port conditions (PortOp/Port1/Port2 only)
}

// parseRuleLine parses one rule (or anchor rule) and expands its lists
// into the rules the kernel would hold.
func parseRuleLine(toks []token) ([]Rule, error) {
	p := &ruleParser{toks: toks}
	var r Rule
	first, _ := p.next()
	switch first.text {
	case "anchor", "scrub-anchor", "nat-anchor", "rdr-anchor", "binat-anchor", "dummynet-anchor":
		name, ok := p.next()
		if !ok || !name.quoted && (name.text == "{" || name.text == "") {
			return nil, pfError("syntax error")
		}
		r.Action, r.Anchor = first.text, name.text
		r.Type = map[string]RuleType{"anchor": TypeFilter, "scrub-anchor": TypeScrub, "nat-anchor": TypeNat,
			"rdr-anchor": TypeRdr, "binat-anchor": TypeBinat, "dummynet-anchor": TypeDummynet}[first.text]
		if r.Type == TypeScrub {
			r.Fragment = "fragment reassemble"
		}
	case "pass":
		r.Action, r.Type = "pass", TypeFilter
	case "block":
		r.Action, r.Type = "block drop", TypeFilter
		if p.accept("drop") {
		} else if p.accept("return", "return-rst", "return-icmp") {
			r.Action = "block " + toks[p.pos-1].text
		}
	case "scrub":
		r.Action, r.Type, r.Fragment = "scrub", TypeScrub, "fragment reassemble"
	case "nat", "rdr", "binat":
		r.Action, r.Type = first.text, RuleType(first.text)
	case "dummynet":
		r.Action, r.Type = "dummynet", TypeDummynet
	case "no":
		w, _ := p.next()
		switch w.text {
		case "dummynet":
			r.Action, r.Type = "no dummynet", TypeDummynet
		case "nat", "rdr", "binat":
			r.Action, r.Type = "no "+w.text, RuleType(w.text)
		case "scrub":
			r.Action, r.Type = "no scrub", TypeScrub
		default:
			return nil, pfError("syntax error")
		}
	default:
		return nil, pfError("syntax error")
	}
	if p.accept("in", "out") {
		r.Direction = toks[p.pos-1].text
	}
	if p.accept("log") {
		r.Log = true
	}
	if p.accept("quick") {
		r.Quick = true
	}
	var ifaces []token
	if p.accept("on") {
		if p.accept("!") {
			r.IfNot = true
		}
		var err error
		if ifaces, err = p.list(); err != nil {
			return nil, err
		}
	}
	if p.accept("inet", "inet6") {
		r.AF = toks[p.pos-1].text
	}
	var protos []string
	if p.accept("proto") {
		items, err := p.list()
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			name, err := protoName(it.text)
			if err != nil {
				return nil, err
			}
			protos = append(protos, name)
		}
	}
	var from, to hostSpec
	switch {
	case p.accept("all"):
	default:
		if p.accept("from") {
			var err error
			if from, err = p.hosts(); err != nil {
				return nil, err
			}
		}
		if p.accept("to") {
			var err error
			if to, err = p.hosts(); err != nil {
				return nil, err
			}
		}
	}
	stateful := false
	for p.pos < len(p.toks) {
		t, _ := p.next()
		switch t.text {
		case "pipe", "queue":
			n, ok := p.next()
			if !ok {
				return nil, pfError("syntax error")
			}
			if r.Type != TypeDummynet {
				if t.text == "queue" {
					continue // an ALTQ queue name on a filter rule: no ALTQ, ignored
				}
				return nil, pfError("syntax error")
			}
			v, err := strconv.Atoi(n.text)
			if err != nil {
				if t.text == "queue" {
					return nil, pfError("Cannot specify an altq queue with a dummynet rule")
				}
				return nil, pfError("syntax error")
			}
			r.PipeKind, r.Pipe = t.text, v
			if v < 1 || v > 65535 {
				return nil, pfError("a dummynet rule needs a pipe number between 1 and 65535")
			}
		case "keep", "modulate", "synproxy":
			if !p.accept("state") {
				return nil, pfError("syntax error")
			}
			if r.Type == TypeDummynet {
				return nil, pfError("keep state on dummynet rules is not allowed")
			}
			r.State = t.text + " state"
			stateful = true
		case "no":
			if !p.accept("state") {
				return nil, pfError("syntax error")
			}
			r.State = "no state"
		case "(":
			if r.Type == TypeDummynet {
				return nil, pfError("Dummynet rules must be stateless")
			}
			if !stateful {
				return nil, pfError("syntax error")
			}
			var opts []string
			for p.peek() != ")" && p.peek() != "" {
				tk, _ := p.next()
				opts = append(opts, tk.text)
			}
			if !p.accept(")") {
				return nil, pfError("syntax error")
			}
			r.State += " (" + strings.ReplaceAll(strings.Join(opts, " "), " ,", ",") + ")"
		case "flags":
			f, ok := p.next()
			if !ok {
				return nil, pfError("syntax error")
			}
			r.Flags = f.text
		case "icmp-type", "icmp6-type":
			f, ok := p.next()
			if !ok {
				return nil, pfError("syntax error")
			}
			r.ICMPType = f.text
			if p.accept("code") {
				c, _ := p.next()
				r.ICMPType += " code " + c.text
			}
		case "probability":
			f, ok := p.next()
			if !ok {
				return nil, pfError("syntax error")
			}
			r.Probability = f.text
		case "allow-opts":
			r.AllowOpts = true
		case "label":
			f, ok := p.next()
			if !ok {
				return nil, pfError("syntax error")
			}
			if len(f.text) > 63 {
				return nil, pfError("rule label too long (max 63 chars)")
			}
			r.Label = f.text
		case "tag", "tagged":
			f, ok := p.next()
			if !ok {
				return nil, pfError("syntax error")
			}
			if t.text == "tag" {
				r.Tag = f.text
			} else {
				r.Tagged = f.text
			}
		case "fragment":
			f, ok := p.next()
			if !ok || r.Type != TypeScrub {
				return nil, pfError("syntax error")
			}
			r.Fragment = "fragment " + f.text
		case "->":
			if r.Type != TypeNat && r.Type != TypeRdr && r.Type != TypeBinat {
				return nil, pfError("syntax error")
			}
			var rest []string
			for p.pos < len(p.toks) {
				tk, _ := p.next()
				rest = append(rest, tk.text)
			}
			r.Redirect = strings.Join(rest, " ")
		default:
			return nil, pfError("syntax error")
		}
	}
	if r.Type == TypeDummynet && !r.isAnchorRule() {
		switch {
		case r.Action == "no dummynet" && r.Pipe != 0:
			return nil, pfError("specifying a pipe with no dummynet doesn't make sense")
		case r.Action == "dummynet" && r.Pipe == 0:
			return nil, pfError("a dummynet rule needs a pipe number between 1 and 65535")
		case r.Action == "dummynet" && r.Direction == "":
			return nil, pfError("a dummynet rule cannot be specified without direction")
		}
	}
	if len(from.ports)+len(to.ports) > 0 {
		for _, pr := range protos {
			if pr != "tcp" && pr != "udp" {
				return nil, pfError("port only applies to tcp/udp")
			}
		}
		if len(protos) == 0 {
			return nil, pfError("port only applies to tcp/udp")
		}
	}
	rules := expandRule(r, ifaces, protos, from, to)
	if len(rules) == 0 {
		return nil, pfError("rule expands to no valid combination")
	}
	return rules, nil
}

func protoName(s string) (string, error) {
	if name, ok := protocols[s]; ok {
		return name, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n <= 255 {
		if name, ok := protocolNumbers[n]; ok {
			return name, nil
		}
		return strconv.Itoa(n), nil
	}
	return "", fmt.Errorf("unknown protocol %s", s)
}

func (p *ruleParser) hosts() (hostSpec, error) {
	var h hostSpec
	if p.peek() != "port" {
		neg := p.accept("!")
		items, err := p.list()
		if err != nil {
			return h, err
		}
		for _, it := range items {
			neg2 := neg
			text := it.text
			if strings.HasPrefix(text, "!") {
				neg2, text = true, text[1:]
			}
			if text == "any" {
				if neg2 {
					return h, pfError("syntax error")
				}
				h.addrs = append(h.addrs, Addr{})
				continue
			}
			pfx, err := parseHost(text)
			if err != nil {
				return h, err
			}
			h.addrs = append(h.addrs, Addr{Not: neg2, Prefix: pfx})
		}
	}
	if p.accept("port") {
		ports, err := p.ports()
		if err != nil {
			return h, err
		}
		h.ports = ports
	}
	return h, nil
}

func parseHost(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("invalid netmask '%s'", s)
		}
		return pfx.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("no IP address found for %s", s)
	}
	a = a.WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func (p *ruleParser) ports() ([]Addr, error) {
	var out []Addr
	one := func() (Addr, error) {
		var a Addr
		if p.accept("=", "!=", "<", "<=", ">", ">=") {
			a.PortOp = p.toks[p.pos-1].text
			n, err := p.port()
			if err != nil {
				return a, err
			}
			a.Port1 = n
			return a, nil
		}
		t, ok := p.next()
		if !ok {
			return a, pfError("syntax error")
		}
		if lo, hi, found := strings.Cut(t.text, ":"); found {
			l, err1 := portValue(lo)
			h, err2 := portValue(hi)
			if err1 != nil || err2 != nil {
				return a, fmt.Errorf("unknown port %s", t.text)
			}
			return Addr{PortOp: ":", Port1: l, Port2: h}, nil
		}
		n, err := portValue(t.text)
		if err != nil {
			return a, err
		}
		if p.accept("><", "<>") {
			op := p.toks[p.pos-1].text
			m, err := p.port()
			if err != nil {
				return a, err
			}
			return Addr{PortOp: op, Port1: n, Port2: m}, nil
		}
		return Addr{PortOp: "=", Port1: n}, nil
	}
	if p.accept("{") {
		for !p.accept("}") {
			if p.accept(",") {
				continue
			}
			if p.peek() == "" {
				return nil, pfError("syntax error")
			}
			a, err := one()
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		return out, nil
	}
	a, err := one()
	if err != nil {
		return nil, err
	}
	return []Addr{a}, nil
}

func (p *ruleParser) port() (int, error) {
	t, ok := p.next()
	if !ok {
		return 0, pfError("syntax error")
	}
	return portValue(t.text)
}

func portValue(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > 65535 {
			return 0, fmt.Errorf("illegal port value %d", n)
		}
		return n, nil
	}
	if n, ok := services[s]; ok {
		return n, nil
	}
	return 0, fmt.Errorf("unknown port %s", s)
}

// expandRule makes one kernel rule per combination of interface, protocol,
// source, source port, destination and destination port, in that nesting
// order, skipping combinations whose address families disagree. An
// address fixes the rule's family (reference §3.4, unverified).
func expandRule(base Rule, ifaces []token, protos []string, from, to hostSpec) []Rule {
	if len(ifaces) == 0 {
		ifaces = []token{{}}
	}
	if len(protos) == 0 {
		protos = []string{""}
	}
	orAny := func(a []Addr) []Addr {
		if len(a) == 0 {
			return []Addr{{}}
		}
		return a
	}
	var out []Rule
	for _, ifc := range ifaces {
		for _, pr := range protos {
			for _, src := range orAny(from.addrs) {
				for _, sp := range orAny(from.ports) {
					for _, dst := range orAny(to.addrs) {
						for _, dp := range orAny(to.ports) {
							r := base
							r.Interface, r.Proto = ifc.text, pr
							r.From = Addr{Not: src.Not, Prefix: src.Prefix, PortOp: sp.PortOp, Port1: sp.Port1, Port2: sp.Port2}
							r.To = Addr{Not: dst.Not, Prefix: dst.Prefix, PortOp: dp.PortOp, Port1: dp.Port1, Port2: dp.Port2}
							af := r.AF
							ok := true
							for _, a := range []Addr{r.From, r.To} {
								if !a.Prefix.IsValid() {
									continue
								}
								fam := "inet"
								if a.Prefix.Addr().Is6() {
									fam = "inet6"
								}
								if af != "" && af != fam {
									ok = false
								}
								af = fam
							}
							if !ok {
								continue
							}
							r.AF = af
							out = append(out, r)
						}
					}
				}
			}
		}
	}
	return out
}
