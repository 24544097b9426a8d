// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/macake/macake/backend"
	"github.com/macake/macake/cmd/macake/internal/exitcode"
	"github.com/macake/macake/config"
	"github.com/macake/macake/config/settings"
	"github.com/macake/macake/desired"
	"github.com/macake/macake/internal/english"
	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/session"
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

func runLinks(e *env, args []string) int {
	fs := linksCmd.flags()
	asJSON := fs.Bool("json", false, "print one JSON document")
	if done, code := linksCmd.parseNoArgs(e, fs, args); done {
		return code
	}
	target := config.TargetDarwin
	if name, err := backend.Choose(runtime.GOOS, e.getenv); err == nil && name == "tc" {
		target = config.TargetLinux
	}
	pol, err := settings.LoadPolicies(e.configDir, session.LoadOptions(target, e.euid() != 0))
	problems := config.Problems(err)
	code := exitcode.OK
	if len(problems) > 0 {
		code = exitcode.Config
	}
	source := "detected"
	if p := e.getenv(linkfacts.EnvFile); p != "" {
		source = linkfacts.EnvFile + "=" + p
	}
	facts, ferr := linkfacts.Read(e.ctx, e.getenv)
	if ferr != nil {
		fmt.Fprintf(e.stderr, "macake links: %v\n", ferr)
		return exitcode.Failure
	}
	rep := desired.NewLinksReport(pol, problems, facts, source)

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
		fmt.Fprintf(e.stderr, "macake links: %s; the files with problems are left out below\n", english.Plural(len(problems), "configuration problem"))
	}
	_ = rep.WriteText(e.stdout) // the exit status reports the policies and the network, not stdout
	return code
}
