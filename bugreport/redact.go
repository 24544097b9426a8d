// SPDX-License-Identifier: Apache-2.0

package bugreport

import (
	"fmt"
	"slices"
	"strings"

	"github.com/macake/macake/internal/lazyregexp"
)

// Redactor masks what identifies a person's networks in a report: MAC
// addresses (a gateway's names the router, and so the home) and Wi-Fi
// names (SSIDs). Each distinct value gets one mask, the same everywhere
// in the report ([MAC-1], [SSID-1], …), so the report still shows that
// the policy's gateway_mac is the gateway the machine sees, without
// saying which it is.
type Redactor struct {
	macs  map[string]string
	ssids map[string]string
	known []string // SSIDs to mask wherever they appear, longest first
}

// NewRedactor returns a Redactor that also masks each of ssids wherever
// it appears (the SSIDs the machine and the policies know), besides the
// SSIDs it finds after an ssid key.
func NewRedactor(ssids ...string) *Redactor {
	r := &Redactor{macs: map[string]string{}, ssids: map[string]string{}}
	for _, s := range ssids {
		r.learn(s)
	}
	return r
}

// minBareSSID is the shortest SSID masked wherever it appears; a shorter
// one ("a", "42") is masked only after an ssid key, or it would mask
// half the report.
const minBareSSID = 3

func (r *Redactor) learn(ssid string) {
	if ssid == "" || strings.HasPrefix(ssid, "[SSID-") || strings.EqualFold(ssid, "none") || strings.EqualFold(ssid, "null") {
		return
	}
	if _, ok := r.ssids[ssid]; !ok {
		r.ssids[ssid] = fmt.Sprintf("[SSID-%d]", len(r.ssids)+1)
		if len(ssid) >= minBareSSID {
			r.known = append(r.known, ssid)
			slices.SortFunc(r.known, func(a, b string) int { return len(b) - len(a) })
		}
	}
}

// macRE finds MAC-like runs: six groups of one or two hex digits joined
// by colons or dashes (macOS's arp prints "0:1b:..." without leading
// zeros). isMAC then rejects runs that are part of something longer, an
// IPv6 address above all.
var macRE = lazyregexp.New(`(?i)[0-9a-f]{1,2}([:-])[0-9a-f]{1,2}(?:[:-][0-9a-f]{1,2}){4}`)

// ssidValueREs find an SSID where macake's outputs put one, each with
// the value as its second group: the policy key and the JSON field
// (ssid = "X", "ssid": "X"), the log's ssid="X" and ssid=X, and the prose
// SSID "X" and Wi-Fi "X", also inside a JSON string (SSID \"X\"). Bare
// words after "ssid" are not taken: prose says "the ssid matches".
var ssidValueREs = []*lazyregexp.Regexp{
	lazyregexp.New(`(?i)("?\bssid"?\s*[:=]\s*)"((?:[^"\\]|\\.)*)"`),
	lazyregexp.New(`(?i)(\bssid=)([^\s",}\]\\]+)`),
	lazyregexp.New(`(?i)(\b(?:ssid|wi-fi)\s+)"((?:[^"\\]|\\.)*)"`),
	lazyregexp.New(`(?i)(\b(?:ssid|wi-fi)\s+)\\"((?:[^"\\]|\\[^"])*)\\"`),
}

// ssidChangeRE finds the log's account of a network change, "ssid A ->
// B", whose names are unquoted and may hold spaces; they end at a comma,
// a quote or the line's end.
var ssidChangeRE = lazyregexp.New(`(?i)\bssid ([^,"\n]*?) -> ([^,"\n]*)`)

// Redact returns text with every MAC address and SSID masked.
func (r *Redactor) Redact(text string) string {
	for _, m := range ssidChangeRE.FindAllStringSubmatch(text, -1) {
		for _, v := range m[1:] {
			r.learn(strings.TrimSpace(v))
		}
	}
	// SSIDs after their keys: they teach the bare ones too.
	for _, re := range ssidValueREs {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			r.learn(unescape(m[2]))
		}
		text = re.ReplaceAllStringFunc(text, func(s string) string {
			m := re.FindStringSubmatchIndex(s)
			mask, ok := r.ssids[unescape(s[m[4]:m[5]])]
			if !ok {
				return s
			}
			return s[:m[4]] + mask + s[m[5]:]
		})
	}
	text = ssidChangeRE.ReplaceAllStringFunc(text, func(s string) string {
		m := ssidChangeRE.FindStringSubmatch(s)
		side := func(v string) string {
			if mask, ok := r.ssids[strings.TrimSpace(v)]; ok {
				return mask
			}
			return v
		}
		return s[:len("ssid ")] + side(m[1]) + " -> " + side(m[2])
	})
	for _, s := range r.known {
		text = strings.ReplaceAll(text, s, r.ssids[s])
		if q := strings.Trim(fmt.Sprintf("%q", s), `"`); q != s {
			// As JSON and Go quote it ("Café" may appear escaped).
			text = strings.ReplaceAll(text, q, r.ssids[s])
		}
	}
	var b strings.Builder
	last := 0
	for _, loc := range macRE.FindAllStringSubmatchIndex(text, -1) {
		start, end := loc[0], loc[1]
		if !isMAC(text, start, end, text[loc[2]:loc[3]]) {
			continue
		}
		b.WriteString(text[last:start])
		b.WriteString(r.mac(text[start:end]))
		last = end
	}
	b.WriteString(text[last:])
	return b.String()
}

// isMAC reports whether text[start:end], a match of macRE whose first
// separator is sep, stands alone: one separator throughout, and no hex
// digit, colon or dot right before or after it (an IPv6 address has more
// groups; a longer hex run is something else).
func isMAC(text string, start, end int, sep string) bool {
	if strings.Count(text[start:end], sep) != 5 {
		return false
	}
	adjacent := func(c byte) bool {
		return c == ':' || c == '.' || c == '-' && sep == "-" || isHex(c)
	}
	if start > 0 && adjacent(text[start-1]) {
		return false
	}
	if end < len(text) && adjacent(text[end]) {
		return false
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// mac returns the mask of one MAC address, the same for every spelling of
// it (case, leading zeros, separator).
func (r *Redactor) mac(s string) string {
	var groups []string
	for _, g := range strings.FieldsFunc(strings.ToLower(s), func(c rune) bool { return c == ':' || c == '-' }) {
		if len(g) == 1 {
			g = "0" + g
		}
		groups = append(groups, g)
	}
	key := strings.Join(groups, ":")
	m, ok := r.macs[key]
	if !ok {
		m = fmt.Sprintf("[MAC-%d]", len(r.macs)+1)
		r.macs[key] = m
	}
	return m
}

// unescape undoes the escapes of a TOML, JSON or logfmt string's text.
func unescape(s string) string {
	return strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(s)
}
