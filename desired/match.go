// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/macake/macake/config"
	"github.com/macake/macake/sense/linkfacts"
)

// Selection is the outcome of Match: which links are active, and for every
// link, why it is or is not.
type Selection struct {
	// Active holds at most one link per interface, sorted by name.
	Active []config.Link
	// Verdicts has one entry per link given to Match, in the same order.
	Verdicts []Verdict
}

// Verdict says whether one link is active and why.
type Verdict struct {
	Name      string `json:"name"`
	Interface string `json:"interface"`
	// Matches is true when the link's match keys all hold on its interface.
	Matches bool `json:"matches"`
	// Active is true for the matching link chosen for its interface.
	Active bool `json:"active"`
	// Reason explains the verdict in one phrase, e.g. "interface en0 is
	// down", "gateway_mac is 74:24:9f:00:00:01, not 00:11:22:33:44:55",
	// "outranked by starlink (priority 10 > 0)".
	Reason string `json:"reason"`
}

// Match chooses the active link for each interface from the link facts.
//
// A link matches when its interface is up and every match key it gives
// (gateway_mac, gateway_ip, ssid) equals that interface's facts; a key the
// facts do not know (an empty SSID, say) does not match. Among the links
// that match on one interface, the winner is the one with the highest
// priority, then the one giving the most match keys (the more specific),
// then the one whose name sorts first. An interface without a winner is
// not shaped. A link in mode "off" can win: it then keeps its interface
// unshaped on purpose.
func Match(links []config.Link, facts linkfacts.Facts) Selection {
	var sel Selection
	sel.Verdicts = make([]Verdict, len(links))
	best := map[string]int{} // interface → index of the current winner
	for i, l := range links {
		v := Verdict{Name: l.Name, Interface: l.Match.Interface}
		v.Matches, v.Reason = matches(l.Match, facts)
		sel.Verdicts[i] = v
		if !v.Matches {
			continue
		}
		if j, ok := best[l.Match.Interface]; !ok || outranks(l, links[j]) {
			best[l.Match.Interface] = i
		}
	}
	for i, l := range links {
		v := &sel.Verdicts[i]
		if !v.Matches {
			continue
		}
		w := best[l.Match.Interface]
		if w == i {
			v.Active = true
			v.Reason = "active: " + v.Reason
			sel.Active = append(sel.Active, l)
			continue
		}
		v.Reason = "matches, but outranked by " + links[w].Name + " (" + whyOutranks(links[w], l) + ")"
	}
	slices.SortFunc(sel.Active, func(a, b config.Link) int { return cmp.Compare(a.Name, b.Name) })
	return sel
}

// outranks reports whether a wins over b on the same interface.
func outranks(a, b config.Link) bool {
	if a.Match.Priority != b.Match.Priority {
		return a.Match.Priority > b.Match.Priority
	}
	if ka, kb := a.Match.Keys(), b.Match.Keys(); ka != kb {
		return ka > kb
	}
	return a.Name < b.Name
}

func whyOutranks(w, l config.Link) string {
	if w.Match.Priority != l.Match.Priority {
		return fmt.Sprintf("priority %d > %d", w.Match.Priority, l.Match.Priority)
	}
	if kw, kl := w.Match.Keys(), l.Match.Keys(); kw != kl {
		return fmt.Sprintf("%d match keys > %d", kw, kl)
	}
	return "same priority and number of match keys; its name sorts first"
}

// matches checks one link's match keys against the facts.
func matches(m config.MatchKeys, facts linkfacts.Facts) (bool, string) {
	f, ok := facts.Interface(m.Interface)
	switch {
	case !ok:
		return false, "interface " + m.Interface + " not present"
	case !f.Up:
		return false, "interface " + m.Interface + " is down"
	}
	var held []string
	if len(m.GatewayMAC) > 0 {
		switch {
		case len(f.GatewayMAC) == 0:
			return false, "gateway_mac wanted " + m.GatewayMAC.String() + ", but the gateway's MAC on " + m.Interface + " is unknown"
		case !m.GatewayMAC.Equal(f.GatewayMAC):
			return false, "gateway_mac is " + f.GatewayMAC.String() + ", not " + m.GatewayMAC.String()
		}
		held = append(held, "gateway_mac")
	}
	if m.GatewayIP.IsValid() {
		switch {
		case !f.GatewayIP.IsValid():
			return false, "gateway_ip wanted " + m.GatewayIP.String() + ", but " + m.Interface + " has no known gateway"
		case m.GatewayIP != f.GatewayIP:
			return false, "gateway_ip is " + f.GatewayIP.String() + ", not " + m.GatewayIP.String()
		}
		held = append(held, "gateway_ip")
	}
	if m.SSID != "" {
		switch {
		case f.SSID == "":
			return false, "ssid wanted " + fmt.Sprintf("%q", m.SSID) + ", but the SSID on " + m.Interface + " is unknown (macOS 15+ hides it without Location access; match on gateway_mac instead)"
		case m.SSID != f.SSID:
			return false, fmt.Sprintf("ssid is %q, not %q", f.SSID, m.SSID)
		}
		held = append(held, "ssid")
	}
	if len(held) == 0 {
		return true, "interface " + m.Interface + " is up"
	}
	return true, "interface " + m.Interface + " is up and " + strings.Join(held, ", ") + " match"
}
