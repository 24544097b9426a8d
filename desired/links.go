// SPDX-License-Identifier: Apache-2.0

package desired

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/sense/linkfacts"
)

// LinksFormatVersion versions the LinksReport JSON document (`macake links
// --json`): scripts read it, so a field that changes meaning bumps it.
// 2.0: errors are the one error schema (diag): "col" became "column", and
// line and column are left out for a whole file.
const LinksFormatVersion = "2.0"

// LinksReport explains one Match to a person: the network as it was sensed,
// every policy with its verdict, and the winners. It is what `macake links`
// prints, as text (WriteText) or as JSON, so both forms say the same thing.
type LinksReport struct {
	FormatVersion string `json:"format_version"`
	ConfigDir     string `json:"config_dir"`
	// FactsSource says where the facts came from ("detected", or the
	// MACAKE_LINK_FACTS file), because a stale test file explains a
	// surprising match better than any verdict.
	FactsSource string `json:"facts_source"`
	// Interfaces are only those a policy names or that have a gateway.
	Interfaces []InterfaceReport `json:"interfaces"`
	// Policies are the valid policies, in the order Match saw them.
	Policies []LinksPolicy `json:"policies"`
	Active   []LinksActive `json:"active"`
	// Errors are the problems of the files left out of Policies.
	Errors []*config.Problem `json:"errors"`
}

// InterfaceReport is one network interface as matching saw it, as the
// links and status documents show it: their own form of the sensed
// facts, so that a change to the sensors never changes a document by
// itself.
type InterfaceReport struct {
	Name       string `json:"name"`
	Up         bool   `json:"up"`
	GatewayIP  string `json:"gateway_ip,omitempty"`
	GatewayMAC string `json:"gateway_mac,omitempty"`
	SSID       string `json:"ssid,omitempty"`
	// Default: the interface carries the default route.
	Default bool `json:"default,omitempty"`
}

// ReportInterface is f as the documents show it.
func ReportInterface(f linkfacts.InterfaceFacts) InterfaceReport {
	return InterfaceReport{
		Name: f.Name, Up: f.Up, SSID: f.SSID, Default: f.Default,
		GatewayIP: config.AddrText(f.GatewayIP), GatewayMAC: f.GatewayMAC.String(),
	}
}

// PolicySummary is what a report says of one policy file, the same in
// the links document and validate's.
type PolicySummary struct {
	Name        string      `json:"name"`
	File        string      `json:"file"`
	Description string      `json:"description,omitempty"`
	Interface   string      `json:"interface"`
	Mode        config.Mode `json:"mode"`
	Priority    int         `json:"priority"`
}

// SummarizePolicy is l's PolicySummary.
func SummarizePolicy(l config.Link) PolicySummary {
	return PolicySummary{
		Name: l.Name, File: l.File, Description: l.Description,
		Interface: l.Match.Interface, Mode: l.Shaper.Mode, Priority: l.Match.Priority,
	}
}

// LinksPolicy is one policy and its Verdict.
type LinksPolicy struct {
	PolicySummary
	Match   LinksMatchKeys `json:"match"`
	Matches bool           `json:"matches"`
	Active  bool           `json:"active"`
	Reason  string         `json:"reason"`
}

// LinksMatchKeys are a policy's optional match keys as text, empty when not
// given, so that the JSON shows the keys a policy sets and nothing else.
type LinksMatchKeys struct {
	GatewayMAC string `json:"gateway_mac,omitempty"`
	GatewayIP  string `json:"gateway_ip,omitempty"`
	SSID       string `json:"ssid,omitempty"`
}

// LinksActive is one winner of Match: the policy that shapes an interface.
type LinksActive struct {
	Interface string `json:"interface"`
	Link      string `json:"link"`
	// Mode is what the link does as its directions' modes make it
	// (config.Shaper.Effective): off when neither direction is shaped.
	Mode config.Mode `json:"mode"`
}

// NewLinksReport matches pol's links against facts and explains the
// outcome. problems are the load errors of the files that pol leaves out;
// factsSource names where facts came from. Every list is non-nil, so that
// the JSON has [] rather than null for "none".
func NewLinksReport(pol settings.Policies, problems []*config.Problem, facts linkfacts.Facts, factsSource string) LinksReport {
	sel := Match(pol.Links, facts)
	rep := LinksReport{
		FormatVersion: LinksFormatVersion, ConfigDir: pol.Dir, FactsSource: factsSource,
		Interfaces: relevantInterfaces(facts, pol.Links), Policies: []LinksPolicy{}, Active: []LinksActive{},
		Errors: problems,
	}
	if rep.Errors == nil {
		rep.Errors = []*config.Problem{}
	}
	for i, l := range pol.Links {
		v := sel.Verdicts[i]
		lp := LinksPolicy{
			PolicySummary: SummarizePolicy(l),
			Match:         LinksMatchKeys{GatewayMAC: l.Match.GatewayMAC.String(), SSID: l.Match.SSID},
			Matches:       v.Matches, Active: v.Active, Reason: v.Reason,
		}
		if l.Match.GatewayIP.IsValid() {
			lp.Match.GatewayIP = l.Match.GatewayIP.String()
		}
		rep.Policies = append(rep.Policies, lp)
	}
	for _, l := range sel.Active {
		rep.Active = append(rep.Active, LinksActive{Interface: l.Match.Interface, Link: l.Name, Mode: l.Shaper.Effective()})
	}
	return rep
}

// relevantInterfaces keeps the interfaces a policy names or that have a
// gateway: a Mac lists many (awdl0, utun3, bridge0) nobody shapes.
func relevantInterfaces(f linkfacts.Facts, links []config.Link) []InterfaceReport {
	named := map[string]bool{}
	for _, l := range links {
		named[l.Match.Interface] = true
	}
	out := []InterfaceReport{}
	for _, i := range f.Interfaces {
		if named[i.Name] || i.GatewayIP.IsValid() || i.Default {
			out = append(out, ReportInterface(i))
		}
	}
	return out
}

// WriteText writes the report for a person: the network, the policies with
// their reasons (the active one starred), and what is and is not shaped. It
// renders from the report alone, so the text cannot say what the JSON does
// not.
func (rep LinksReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Network now (%s):\n", rep.FactsSource)
	if len(rep.Interfaces) == 0 {
		fmt.Fprintln(&b, "  no interface that a policy names, and no gateway")
	}
	nameWidth := 0
	for _, i := range rep.Interfaces {
		nameWidth = max(nameWidth, len(i.Name))
	}
	for _, i := range rep.Interfaces {
		state := "down"
		if i.Up {
			state = "up"
		}
		var details []string
		if gw := config.DescribeGateway(i.GatewayIP, i.GatewayMAC); gw != "" {
			details = append(details, gw)
		}
		if i.SSID != "" {
			details = append(details, "SSID "+strconv.Quote(i.SSID))
		}
		if i.Default {
			details = append(details, "default route")
		}
		line := fmt.Sprintf("  %-*s  %-4s  %s", nameWidth, i.Name, state, strings.Join(details, ", "))
		fmt.Fprintln(&b, strings.TrimRight(line, " "))
	}

	fmt.Fprintf(&b, "\nPolicies in %s:\n", rep.ConfigDir)
	if len(rep.Policies) == 0 {
		fmt.Fprintln(&b, "  none (no valid *.toml files)")
	}
	var widths [3]int
	for _, p := range rep.Policies {
		widths[0] = max(widths[0], len(p.Name))
		widths[1] = max(widths[1], len(p.Interface))
		widths[2] = max(widths[2], len(p.Mode))
	}
	for _, p := range rep.Policies {
		mark := " "
		if p.Active {
			mark = "*"
		}
		line := fmt.Sprintf("  %s %-*s  %-*s  %-*s  %s", mark, widths[0], p.Name, widths[1], p.Interface, widths[2], p.Mode, p.keysText())
		fmt.Fprintln(&b, strings.TrimRight(line, " "))
		fmt.Fprintf(&b, "      %s\n", p.Reason)
	}

	fmt.Fprintln(&b)
	shaped := map[string]bool{}
	if len(rep.Active) == 0 {
		fmt.Fprintln(&b, "Active: none; nothing is shaped.")
	}
	for _, a := range rep.Active {
		shaped[a.Interface] = true
		switch a.Mode {
		case config.ModeOff:
			fmt.Fprintf(&b, "Active: %s on %s (mode off: left unshaped on purpose).\n", a.Link, a.Interface)
		case config.ModeBalanced:
			fmt.Fprintf(&b, "Active: %s on %s (mode balanced: shaped only while 'macake watch' sees a standing queue).\n", a.Link, a.Interface)
		default:
			fmt.Fprintf(&b, "Active: %s on %s (mode %s).\n", a.Link, a.Interface, a.Mode)
		}
	}
	seen := map[string]bool{}
	for _, p := range rep.Policies {
		if !shaped[p.Interface] && !seen[p.Interface] {
			seen[p.Interface] = true
			fmt.Fprintf(&b, "No policy matches on %s: it is not shaped.\n", p.Interface)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// keysText renders a policy's optional match keys, e.g.
// `gateway_mac=74:24:9f:00:00:01 priority=10`.
func (p LinksPolicy) keysText() string {
	var parts []string
	m := p.Match
	if m.GatewayMAC != "" {
		parts = append(parts, "gateway_mac="+m.GatewayMAC)
	}
	if m.GatewayIP != "" {
		parts = append(parts, "gateway_ip="+m.GatewayIP)
	}
	if m.SSID != "" {
		parts = append(parts, "ssid="+strconv.Quote(m.SSID))
	}
	if p.Priority != 0 {
		parts = append(parts, "priority="+strconv.Itoa(p.Priority))
	}
	if len(parts) == 0 {
		return "(any network on the interface)"
	}
	return strings.Join(parts, " ")
}
