// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/macake/macake/config"
	"github.com/macake/macake/reconcile"
	"github.com/macake/macake/sense/linkfacts"
)

var linksCmd = &command{
	name:  "links",
	args:  "[--json]",
	short: "List every policy and which one matches the current network, and why.",
	long: `Shows the network as macake sees it (interfaces, gateways, SSIDs), every
policy file with its match keys, which policy is active on which interface,
and for every other policy why it is not: its interface is down, a match key
differs, or another policy outranks it (higher priority, then more match
keys, then the name). It changes nothing and needs no root.

MACAKE_LINK_FACTS=FILE replaces detection with a JSON file, e.g.
{"interfaces":[{"name":"en0","up":true,"gateway_ip":"192.168.1.1",
"gateway_mac":"74:24:9f:00:00:01","ssid":"STARLINK"}]}

Exit status: 0; 1 when the network cannot be read; 64 usage; 78 when a
policy file is invalid (the valid ones are still listed).`,
}

func init() { linksCmd.run = runLinks }

// linksFormatVersion versions the --json document.
const linksFormatVersion = "1.0"

type linksReport struct {
	FormatVersion string                     `json:"format_version"`
	ConfigDir     string                     `json:"config_dir"`
	FactsSource   string                     `json:"facts_source"`
	Interfaces    []linkfacts.InterfaceFacts `json:"interfaces"`
	Policies      []linksPolicy              `json:"policies"`
	Active        []linksActive              `json:"active"`
	Errors        []*config.Problem          `json:"errors"`
}

type linksPolicy struct {
	Name        string         `json:"name"`
	File        string         `json:"file"`
	Description string         `json:"description,omitempty"`
	Interface   string         `json:"interface"`
	Mode        config.Mode    `json:"mode"`
	Priority    int            `json:"priority"`
	Match       linksMatchKeys `json:"match"`
	Matches     bool           `json:"matches"`
	Active      bool           `json:"active"`
	Reason      string         `json:"reason"`
}

type linksMatchKeys struct {
	GatewayMAC string `json:"gateway_mac,omitempty"`
	GatewayIP  string `json:"gateway_ip,omitempty"`
	SSID       string `json:"ssid,omitempty"`
}

type linksActive struct {
	Interface string      `json:"interface"`
	Link      string      `json:"link"`
	Mode      config.Mode `json:"mode"`
}

func runLinks(e *env, args []string) int {
	fs := linksCmd.flags()
	asJSON := fs.Bool("json", false, "print one JSON document")
	if done, code := linksCmd.parse(e, fs, args); done {
		return code
	}
	if done, code := linksCmd.noArgs(e, fs); done {
		return code
	}
	target := config.TargetDarwin
	if name, err := reconcile.ChooseBackend(runtime.GOOS, e.getenv); err == nil && name == "tc" {
		target = config.TargetLinux
	}
	pol, err := reconcile.LoadPolicies(e.configDir, config.LoadOptions{Target: target, SkipOwnershipCheck: e.euid() != 0})
	problems := config.Problems(err)
	code := exitOK
	if len(problems) > 0 {
		code = exitConfig
	}
	source := "detected"
	if p := e.getenv(linkfacts.EnvFile); p != "" {
		source = linkfacts.EnvFile + "=" + p
	}
	facts, ferr := linkfacts.Read(e.ctx, e.getenv)
	if ferr != nil {
		fmt.Fprintf(e.stderr, "macake links: %v\n", ferr)
		return exitFailure
	}
	sel := reconcile.Match(pol.Links, facts)

	rep := linksReport{
		FormatVersion: linksFormatVersion, ConfigDir: e.configDir, FactsSource: source,
		Interfaces: relevantInterfaces(facts, pol.Links), Policies: []linksPolicy{}, Active: []linksActive{},
		Errors: problems,
	}
	if rep.Errors == nil {
		rep.Errors = []*config.Problem{}
	}
	for i, l := range pol.Links {
		v := sel.Verdicts[i]
		lp := linksPolicy{
			Name: l.Name, File: l.File, Description: l.Description, Interface: l.Match.Interface,
			Mode: l.Shaper.Mode, Priority: l.Match.Priority,
			Match:   linksMatchKeys{GatewayMAC: l.Match.GatewayMAC.String(), SSID: l.Match.SSID},
			Matches: v.Matches, Active: v.Active, Reason: v.Reason,
		}
		if l.Match.GatewayIP.IsValid() {
			lp.Match.GatewayIP = l.Match.GatewayIP.String()
		}
		rep.Policies = append(rep.Policies, lp)
	}
	for _, l := range sel.Active {
		rep.Active = append(rep.Active, linksActive{Interface: l.Match.Interface, Link: l.Name, Mode: l.Shaper.Mode})
	}

	if *asJSON {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(e.stdout, string(out))
		return code
	}
	for _, w := range pol.Warnings {
		fmt.Fprintln(e.stderr, w.String())
	}
	for _, p := range problems {
		fmt.Fprintln(e.stderr, p.Error())
	}
	if len(problems) > 0 {
		fmt.Fprintf(e.stderr, "macake links: %s; the files with problems are left out below\n", plural(len(problems), "configuration problem"))
	}
	writeLinksText(e, rep, pol.Links)
	return code
}

// relevantInterfaces keeps the interfaces a policy names or that have a
// gateway: a Mac lists many (awdl0, utun3, bridge0) nobody shapes.
func relevantInterfaces(f linkfacts.Facts, links []config.Link) []linkfacts.InterfaceFacts {
	named := map[string]bool{}
	for _, l := range links {
		named[l.Match.Interface] = true
	}
	out := []linkfacts.InterfaceFacts{}
	for _, i := range f.Interfaces {
		if named[i.Name] || i.GatewayIP.IsValid() || i.Default {
			out = append(out, i)
		}
	}
	return out
}

func writeLinksText(e *env, rep linksReport, links []config.Link) {
	w := e.stdout
	fmt.Fprintf(w, "Network now (%s):\n", rep.FactsSource)
	if len(rep.Interfaces) == 0 {
		fmt.Fprintln(w, "  no interface that a policy names, and no gateway")
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
		if i.GatewayIP.IsValid() {
			gw := "gateway " + i.GatewayIP.String()
			if len(i.GatewayMAC) > 0 {
				gw += " (" + i.GatewayMAC.String() + ")"
			}
			details = append(details, gw)
		}
		if i.SSID != "" {
			details = append(details, "SSID "+strconv.Quote(i.SSID))
		}
		if i.Default {
			details = append(details, "default route")
		}
		line := fmt.Sprintf("  %-*s  %-4s  %s", nameWidth, i.Name, state, strings.Join(details, ", "))
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}

	fmt.Fprintf(w, "\nPolicies in %s:\n", rep.ConfigDir)
	if len(rep.Policies) == 0 {
		fmt.Fprintln(w, "  none (no valid *.toml files)")
	}
	var widths [3]int
	keys := make([]string, len(rep.Policies))
	for i, p := range rep.Policies {
		keys[i] = matchKeysText(links[i])
		widths[0] = max(widths[0], len(p.Name))
		widths[1] = max(widths[1], len(p.Interface))
		widths[2] = max(widths[2], len(p.Mode))
	}
	for i, p := range rep.Policies {
		mark := " "
		if p.Active {
			mark = "*"
		}
		line := fmt.Sprintf("  %s %-*s  %-*s  %-*s  %s", mark, widths[0], p.Name, widths[1], p.Interface, widths[2], p.Mode, keys[i])
		fmt.Fprintln(w, strings.TrimRight(line, " "))
		fmt.Fprintf(w, "      %s\n", p.Reason)
	}

	fmt.Fprintln(w)
	shaped := map[string]bool{}
	if len(rep.Active) == 0 {
		fmt.Fprintln(w, "Active: none; nothing is shaped.")
	}
	for _, a := range rep.Active {
		shaped[a.Interface] = true
		switch a.Mode {
		case config.ModeOff:
			fmt.Fprintf(w, "Active: %s on %s (mode off: left unshaped on purpose).\n", a.Link, a.Interface)
		case config.ModeBalanced:
			fmt.Fprintf(w, "Active: %s on %s (mode balanced: shaped only while 'macake watch' sees a standing queue).\n", a.Link, a.Interface)
		default:
			fmt.Fprintf(w, "Active: %s on %s (mode %s).\n", a.Link, a.Interface, a.Mode)
		}
	}
	seen := map[string]bool{}
	for _, p := range rep.Policies {
		if !shaped[p.Interface] && !seen[p.Interface] {
			seen[p.Interface] = true
			fmt.Fprintf(w, "No policy matches on %s: it is not shaped.\n", p.Interface)
		}
	}
}

// matchKeysText renders a policy's optional match keys, e.g.
// `gateway_mac=74:24:9f:00:00:01 priority=10`.
func matchKeysText(l config.Link) string {
	var parts []string
	m := l.Match
	if len(m.GatewayMAC) > 0 {
		parts = append(parts, "gateway_mac="+m.GatewayMAC.String())
	}
	if m.GatewayIP.IsValid() {
		parts = append(parts, "gateway_ip="+m.GatewayIP.String())
	}
	if m.SSID != "" {
		parts = append(parts, "ssid="+strconv.Quote(m.SSID))
	}
	if m.Priority != 0 {
		parts = append(parts, "priority="+strconv.Itoa(m.Priority))
	}
	if len(parts) == 0 {
		return "(any network on the interface)"
	}
	return strings.Join(parts, " ")
}
