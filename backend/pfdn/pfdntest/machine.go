// SPDX-License-Identifier: Apache-2.0

package pfdntest

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"
)

// Machine is the emulated Mac's pf and dummynet state: everything a reboot
// clears, plus the few files pfctl reads. It is plain data, so the emulator
// binaries can keep it in a JSON file between calls.
type Machine struct {
	// Unprivileged makes every kernel access fail as it does for a
	// non-root caller.
	Unprivileged bool `json:"unprivileged,omitempty"`
	// NoALTQLines drops the two ALTQ lines pfctl prints on stderr (some
	// captures lack them; reference §3.2).
	NoALTQLines bool `json:"no_altq_lines,omitempty"`
	// MissingTools makes the emulator answer as if pfctl/dnctl were not
	// installed.
	MissingTools bool `json:"missing_tools,omitempty"`

	PF       PF                  `json:"pf"`
	Rulesets map[string]*Ruleset `json:"rulesets"`
	Dummynet Dummynet            `json:"dummynet"`
	// Files are the files pfctl may load (/etc/pf.conf and the com.apple
	// anchor file); others are read from the real file system.
	Files map[string]string `json:"files"`

	// Seq orders object creation (newest-first listing within a hash bucket).
	Seq uint64 `json:"seq"`
	// Rand is the token generator's state (splitmix64).
	Rand uint64 `json:"rand"`
	// NextPID numbers in-process callers.
	NextPID int `json:"next_pid"`
}

// PF is pf's global state: enabled, the reference count and the tokens.
type PF struct {
	Enabled  bool    `json:"enabled"`
	RefCount uint64  `json:"refcount"`
	Tokens   []Token `json:"tokens,omitempty"`
	// Since is when pf was last enabled or disabled (Unix seconds).
	Since int64 `json:"since"`
}

// Token is one pf enable reference (pfctl -E).
type Token struct {
	Value   uint64 `json:"value"`
	PID     int    `json:"pid"`
	Process string `json:"process"`
	Created int64  `json:"created"`
}

// Ruleset is one anchor's (or the main ruleset's) rules, per type.
type Ruleset struct {
	Rules   map[RuleType][]Rule `json:"rules,omitempty"`
	Options []string            `json:"options,omitempty"`
}

func (rs *Ruleset) empty() bool {
	for _, r := range rs.Rules {
		if len(r) > 0 {
			return false
		}
	}
	return true
}

// Dummynet is the dummynet kernel state.
type Dummynet struct {
	// Loaded becomes true on the first dnctl call (reference §2.1); until
	// then pf passes packets unshaped.
	Loaded bool     `json:"loaded"`
	Pipes  []*Pipe  `json:"pipes,omitempty"`
	Queues []*Queue `json:"queues,omitempty"`
}

// FlowSet holds the parameters pipes and queues share (struct dn_flow_set).
type FlowSet struct {
	QSize   int32    `json:"qsize"`
	Bytes   bool     `json:"bytes,omitempty"`
	PLR     int32    `json:"plr,omitempty"`
	NoError bool     `json:"noerror,omitempty"`
	HasMask bool     `json:"has_mask,omitempty"`
	Mask    FlowMask `json:"mask"`
	RqSize  int32    `json:"buckets"`
	RED     bool     `json:"red,omitempty"`
	Gentle  bool     `json:"gentle,omitempty"`
	WQ      int32    `json:"w_q,omitempty"`
	MinTh   int32    `json:"min_th,omitempty"`
	MaxTh   int32    `json:"max_th,omitempty"`
	MaxP    int32    `json:"max_p,omitempty"`
	Flows   []Flow   `json:"flows,omitempty"`
}

// FlowMask selects which packet fields split a pipe into flow queues.
type FlowMask struct {
	Proto   uint8  `json:"proto,omitempty"`
	SrcIP   uint32 `json:"src_ip,omitempty"`
	DstIP   uint32 `json:"dst_ip,omitempty"`
	SrcPort uint16 `json:"src_port,omitempty"`
	DstPort uint16 `json:"dst_port,omitempty"`
	// SrcIP6Bits and DstIP6Bits are the IPv6 mask lengths (n2mask).
	SrcIP6Bits int    `json:"src_ip6_bits,omitempty"`
	DstIP6Bits int    `json:"dst_ip6_bits,omitempty"`
	FlowID6    uint32 `json:"flow_id6,omitempty"`
}

// Flow is one flow queue of a pipe, with its counters.
type Flow struct {
	Slot     int        `json:"slot"`
	Proto    uint8      `json:"proto"`
	Src      netip.Addr `json:"src"`
	Dst      netip.Addr `json:"dst"`
	SrcPort  uint16     `json:"sport"`
	DstPort  uint16     `json:"dport"`
	TotPkts  uint64     `json:"tot_pkts"`
	TotBytes uint64     `json:"tot_bytes"`
	Len      uint32     `json:"len,omitempty"`
	LenBytes uint32     `json:"len_bytes,omitempty"`
	Drops    uint32     `json:"drops,omitempty"`
}

// Pipe is a dummynet pipe (struct dn_pipe).
type Pipe struct {
	Number    int32   `json:"number"`
	Bandwidth int32   `json:"bandwidth"`
	IfName    string  `json:"if_name,omitempty"`
	Delay     int32   `json:"delay"`
	FS        FlowSet `json:"fs"`
	Seq       uint64  `json:"seq"`
}

// Queue is a dummynet queue, a flow set attached to a pipe.
type Queue struct {
	Number uint16  `json:"number"`
	Parent int32   `json:"parent"`
	Weight int32   `json:"weight"`
	FS     FlowSet `json:"fs"`
	Seq    uint64  `json:"seq"`
}

// Stock file contents (reference §3.8): the active lines of macOS's
// /etc/pf.conf and /etc/pf.anchors/com.apple.
const (
	StockPFConf = `#
# Default PF configuration file (as shipped with macOS; comments abridged).
# Nested anchors rely on the anchor points defined here: do not flush the
# main ruleset. Services enable pf with pfctl -E and release it with -X.
#
scrub-anchor "com.apple/*"
nat-anchor "com.apple/*"
rdr-anchor "com.apple/*"
dummynet-anchor "com.apple/*"
anchor "com.apple/*"
load anchor "com.apple" from "/etc/pf.anchors/com.apple"
`
	StockAppleAnchor = `#
# Default anchors of the com.apple anchor (comments abridged).
#
anchor "200.AirDrop/*"
anchor "250.ApplicationFirewall/*"
`
)

// NewMachine returns a Mac just after boot: pf disabled, the stock main
// ruleset loaded by launchd's `pfctl -f /etc/pf.conf`, no pipes, dummynet
// not yet loaded.
func NewMachine() *Machine {
	m := &Machine{Rand: 0x6d6163616b65, NextPID: 4000}
	m.boot(0)
	return m
}

// boot resets everything volatile and loads the stock rulesets.
func (m *Machine) boot(now int64) {
	m.PF = PF{Since: now}
	m.Dummynet = Dummynet{}
	if m.Files == nil {
		m.Files = map[string]string{}
	}
	if _, ok := m.Files["/etc/pf.conf"]; !ok {
		m.Files["/etc/pf.conf"] = StockPFConf
	}
	if _, ok := m.Files["/etc/pf.anchors/com.apple"]; !ok {
		m.Files["/etc/pf.anchors/com.apple"] = StockAppleAnchor
	}
	m.Rulesets = map[string]*Ruleset{"": {}}
	main, _ := parseConf(m.Files["/etc/pf.conf"], true)
	m.Rulesets[""] = rulesetOf(main.rules, main.options)
	for _, l := range main.loads {
		f, _ := parseConf(m.Files[l.file], false)
		m.Rulesets[l.anchor] = rulesetOf(f.rules, nil)
	}
	// As captured on a real Mac, only the application firewall's child
	// anchor exists after boot (reference §3.3, `-a com.apple -s Anchors`).
	m.Rulesets["com.apple/250.ApplicationFirewall"] = &Ruleset{}
}

func rulesetOf(rules []Rule, options []string) *Ruleset {
	rs := &Ruleset{Rules: map[RuleType][]Rule{}, Options: options}
	for _, r := range rules {
		rs.Rules[r.Type] = append(rs.Rules[r.Type], r)
	}
	return rs
}

// nextToken returns a fresh 64-bit token (splitmix64), never 0 or in use.
func (m *Machine) nextToken() uint64 {
	for {
		m.Rand += 0x9e3779b97f4a7c15
		z := m.Rand
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		if z == 0 {
			continue
		}
		used := false
		for _, t := range m.PF.Tokens {
			used = used || t.Value == z
		}
		if !used {
			return z
		}
	}
}

// --- pf kernel operations (reference §3.2) ---

// startRef is DIOCSTARTREF (pfctl -E): always a new token, pf started if
// needed, one more reference.
func (m *Machine) startRef(pid int, process string, now time.Time) uint64 {
	tok := m.nextToken()
	m.PF.Tokens = append(m.PF.Tokens, Token{Value: tok, PID: pid, Process: process, Created: now.UnixNano()})
	if !m.PF.Enabled {
		m.PF.Enabled, m.PF.Since = true, now.Unix()
	}
	m.PF.RefCount++
	return tok
}

// start is DIOCSTART (pfctl -e). When pf already runs it fails (EEXIST),
// yet still takes a reference if every reference so far has a token.
func (m *Machine) start(now int64) (alreadyRunning bool) {
	if m.PF.Enabled {
		if uint64(len(m.PF.Tokens)) == m.PF.RefCount {
			m.PF.RefCount++
		}
		return true
	}
	m.PF.Enabled, m.PF.Since = true, now
	m.PF.RefCount++
	return false
}

// stop is DIOCSTOP (pfctl -d): pf off, every reference and token gone.
func (m *Machine) stop(now int64) (notRunning bool) {
	if !m.PF.Enabled {
		return true
	}
	m.PF.Enabled, m.PF.Since = false, now
	m.PF.RefCount = 0
	m.PF.Tokens = nil
	return false
}

// stopRef is DIOCSTOPREF (pfctl -X): ENOENT when pf is off, EINVAL for an
// unknown token, else one reference less (pf stops at zero).
func (m *Machine) stopRef(tok uint64, now int64) (remaining uint64, err string) {
	if !m.PF.Enabled {
		return 0, "ENOENT"
	}
	i := -1
	for j, t := range m.PF.Tokens {
		if t.Value == tok {
			i = j
		}
	}
	if i < 0 {
		return 0, "EINVAL"
	}
	m.PF.Tokens = append(m.PF.Tokens[:i], m.PF.Tokens[i+1:]...)
	if m.PF.RefCount > 0 {
		m.PF.RefCount--
	}
	if m.PF.RefCount == 0 {
		m.PF.Enabled, m.PF.Since = false, now
	}
	return m.PF.RefCount, ""
}

// resolveAnchor returns the ruleset path an anchor rule in ruleset `in`
// names: relative to it unless it starts with "/", with a trailing "/*"
// (wildcard) naming the parent whose children are evaluated.
func resolveAnchor(in, name string) (path string, wildcard bool) {
	if strings.HasSuffix(name, "/*") {
		name, wildcard = strings.TrimSuffix(name, "/*"), true
	} else if name == "*" {
		name, wildcard = "", true
	}
	if strings.HasPrefix(name, "/") {
		return strings.Trim(name, "/"), wildcard
	}
	if in == "" || name == "" {
		if name == "" {
			return in, wildcard
		}
		return name, wildcard
	}
	return in + "/" + name, wildcard
}

// commit replaces the given rule types of ruleset path in one transaction
// (creating the ruleset), then removes rulesets left empty and
// unreferenced. An anchor rule keeps the anchor it names alive but, unlike
// xnu's pf_anchor_setup, does not create it: that is what keeps the stock
// anchor set equal to the one captured on a real Mac (only
// com.apple/250.ApplicationFirewall under com.apple, reference §3.3)
// whether it came from boot or from a later `pfctl -f /etc/pf.conf`.
func (m *Machine) commit(path string, types []RuleType, rules []Rule, options []string, setOptions bool) {
	// Like pf_find_or_create_ruleset, make every missing anchor on the path.
	for i := 0; i <= len(path); i++ {
		if i == len(path) || path[i] == '/' {
			if p := path[:i]; m.Rulesets[p] == nil {
				m.Rulesets[p] = &Ruleset{}
			}
		}
	}
	rs := m.Rulesets[path]
	if rs.Rules == nil {
		rs.Rules = map[RuleType][]Rule{}
	}
	for _, t := range types {
		delete(rs.Rules, t)
	}
	for _, r := range rules {
		rs.Rules[r.Type] = append(rs.Rules[r.Type], r)
	}
	if setOptions {
		rs.Options = options
	}
	m.cleanup()
}

// cleanup deletes every anchor that has no rules, no children and no
// anchor rule referring to it (pf_remove_if_empty_ruleset), until none is
// left to delete.
func (m *Machine) cleanup() {
	for {
		refs := map[string]bool{}
		for p, rs := range m.Rulesets {
			for _, list := range rs.Rules {
				for _, r := range list {
					if r.isAnchorRule() {
						t, _ := resolveAnchor(p, r.Anchor)
						refs[t] = true
					}
				}
			}
		}
		removed := false
		for p, rs := range m.Rulesets {
			if p == "" || !rs.empty() || refs[p] || len(m.children(p)) > 0 {
				continue
			}
			delete(m.Rulesets, p)
			removed = true
		}
		if !removed {
			return
		}
	}
}

// children returns the direct children of path, sorted by name.
func (m *Machine) children(path string) []string {
	var out []string
	prefix := path + "/"
	if path == "" {
		prefix = ""
	}
	for p := range m.Rulesets {
		if p == "" || !strings.HasPrefix(p, prefix) {
			continue
		}
		if rest := p[len(prefix):]; rest != "" && !strings.Contains(rest, "/") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// --- dummynet kernel operations (reference §1.6, §2) ---

// dnHash is the kernel's HASH(): pipes and queues are listed bucket by
// bucket, newest first within a bucket.
func dnHash(n int64) int64 { return ((n >> 8) ^ (n >> 4) ^ n) & 0x0f }

// Bucket is the hash bucket `dnctl list` lists pipe or queue n in
// (reference §1.7): two pipes in one bucket are listed newest first.
func Bucket(n int) int { return int(dnHash(int64(n))) }

func (m *Machine) pipe(n int32) *Pipe {
	for _, p := range m.Dummynet.Pipes {
		if p.Number == n {
			return p
		}
	}
	return nil
}

func (m *Machine) queue(n uint16) *Queue {
	for _, q := range m.Dummynet.Queues {
		if q.Number == n {
			return q
		}
	}
	return nil
}

// setFSParms copies the flow-set parameters and applies the kernel clamps:
// slot queues of 0 or above 100 become 50, byte queues above 1 MB become
// 1 MB (set_fs_parms).
func setFSParms(x *FlowSet, src FlowSet) {
	flows, rq := x.Flows, x.RqSize
	*x = src
	x.Flows, x.RqSize = flows, rq
	if x.Bytes {
		if x.QSize > 1024*1024 {
			x.QSize = 1024 * 1024
		}
	} else if x.QSize == 0 || x.QSize > 100 {
		x.QSize = 50
	}
	if !x.RED {
		x.Gentle, x.WQ, x.MinTh, x.MaxTh, x.MaxP = false, 0, 0, 0, 0
	}
}

// allocHash sizes the flow hash, only when the object is created: with a
// mask, the requested buckets (default 64) clamped to 4–65536; without, 1.
func allocHash(x *FlowSet, requested int32) {
	if !x.HasMask {
		x.RqSize = 1
		return
	}
	l := requested
	if l == 0 {
		l = 64
	}
	if l < 4 {
		l = 4
	} else if l > 65536 {
		l = 65536
	}
	x.RqSize = l
}

// configPipe is IP_DUMMYNET_CONFIGURE for a pipe: every field replaced,
// queued packets and flow counters kept.
func (m *Machine) configPipe(req Pipe) {
	p := m.pipe(req.Number)
	created := p == nil
	if created {
		m.Seq++
		p = &Pipe{Number: req.Number, Seq: m.Seq}
		m.Dummynet.Pipes = append(m.Dummynet.Pipes, p)
	}
	p.Bandwidth, p.IfName, p.Delay = req.Bandwidth, req.IfName, req.Delay
	setFSParms(&p.FS, req.FS)
	if created {
		allocHash(&p.FS, req.FS.RqSize)
	}
}

// configQueue is IP_DUMMYNET_CONFIGURE for a queue. Weight and parent are
// fixed at creation; asking for another parent later is EINVAL.
func (m *Machine) configQueue(req Queue) (errno string) {
	q := m.queue(req.Number)
	if q == nil {
		if req.Parent == 0 {
			return "EINVAL"
		}
		m.Seq++
		w := req.Weight
		if w == 0 {
			w = 1
		} else if w > 100 {
			w = 100
		}
		q = &Queue{Number: req.Number, Parent: req.Parent, Weight: w, Seq: m.Seq}
		setFSParms(&q.FS, req.FS)
		allocHash(&q.FS, req.FS.RqSize)
		m.Dummynet.Queues = append(m.Dummynet.Queues, q)
		return ""
	}
	if req.Parent != 0 && req.Parent != q.Parent {
		return "EINVAL"
	}
	setFSParms(&q.FS, req.FS)
	return ""
}

// deletePipe removes pipe n (EINVAL when missing); queues attached to it
// lose their packets.
func (m *Machine) deletePipe(n int32) (errno string) {
	for i, p := range m.Dummynet.Pipes {
		if p.Number == n {
			m.Dummynet.Pipes = append(m.Dummynet.Pipes[:i], m.Dummynet.Pipes[i+1:]...)
			for _, q := range m.Dummynet.Queues {
				if q.Parent == n {
					q.FS.Flows = nil
				}
			}
			return ""
		}
	}
	return "EINVAL"
}

func (m *Machine) deleteQueue(n uint16) (errno string) {
	for i, q := range m.Dummynet.Queues {
		if q.Number == n {
			m.Dummynet.Queues = append(m.Dummynet.Queues[:i], m.Dummynet.Queues[i+1:]...)
			return ""
		}
	}
	return "EINVAL"
}

// flushDummynet deletes every pipe and queue.
func (m *Machine) flushDummynet() { m.Dummynet.Pipes, m.Dummynet.Queues = nil, nil }

// listedPipes returns the pipes in listing order.
func (m *Machine) listedPipes() []*Pipe {
	return listed(m.Dummynet.Pipes, func(p *Pipe) (int64, uint64) { return int64(p.Number), p.Seq })
}

// listedQueues returns the queues in listing order.
func (m *Machine) listedQueues() []*Queue {
	return listed(m.Dummynet.Queues, func(q *Queue) (int64, uint64) { return int64(q.Number), q.Seq })
}

// listed returns objs in dummynet's listing order: by the hash of their
// number, and newest (highest seq) first within a hash bucket.
func listed[T any](objs []*T, id func(*T) (number int64, seq uint64)) []*T {
	out := append([]*T(nil), objs...)
	sort.SliceStable(out, func(i, j int) bool {
		ni, si := id(out[i])
		nj, sj := id(out[j])
		if hi, hj := dnHash(ni), dnHash(nj); hi != hj {
			return hi < hj
		}
		return si > sj
	})
	return out
}

func (p *Pipe) String() string { return fmt.Sprintf("pipe %d", p.Number) }
