// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/macake/macake/config/problemtest"
	"github.com/macake/macake/config/tomltext"
	"github.com/macake/macake/config/units"
	"github.com/macake/macake/shape"
)

// testLimits are the limits of each target's backend as reconcile gives
// them (config cannot import the backends): dummynet's on darwin; on
// linux, tc's, which are the bounds of every backend.
var testLimits = map[Target]shape.Limits{
	TargetDarwin: {Shaper: "dummynet", MaxRateBits: 2_147_483_000, MaxQueueBytes: 1 << 20},
	TargetLinux:  {Shaper: "tc", MaxRateBits: shape.MaxRateBits, MaxQueueBytes: shape.MaxQueueBytes},
}

func parseTest(t *testing.T, name, text string, target Target) (Link, []string, []string) {
	t.Helper()
	l, ws, err := Parse(name, []byte(text), LoadOptions{Target: target, Limits: testLimits[target]})
	var probs, warns []string
	for _, p := range Problems(err) {
		if p.File != name {
			t.Errorf("problem names file %q, want %q", p.File, name)
		}
		probs = append(probs, problemtest.Pos(p.Line, p.Col, p.Message))
	}
	for _, w := range ws {
		warns = append(warns, problemtest.Pos(w.Line, w.Col, w.Message))
	}
	if err == nil && len(probs) > 0 || err != nil && len(probs) == 0 {
		t.Errorf("error %v does not agree with problems %v", err, probs)
	}
	return l, probs, warns
}

const minimal = "[match]\ninterface = \"en0\"\n"

// TestGatewayZoneOnTheInterface: a link-local gateway written with its
// interface as the zone is kept without it, as the facts have it, so that
// it matches.
func TestGatewayZoneOnTheInterface(t *testing.T) {
	l, _, err := Parse("a.toml", []byte(minimal+"gateway_ip = \"fe80::1%en0\"\n"), LoadOptions{})
	if err != nil || l.Match.GatewayIP != netip.MustParseAddr("fe80::1") {
		t.Fatalf("gateway %v, %v; want fe80::1 without its zone", l.Match.GatewayIP, err)
	}
}

func TestParseRules(t *testing.T) {
	for _, tc := range []struct {
		name     string
		text     string
		target   Target
		problems []string
		warnings []string
	}{
		{name: "minimal", text: minimal},
		{name: "syntax error", text: "[match]\ninterface = \"en0\"\nx = = 1\n", problems: []string{"3:5: TOML syntax"}},
		{name: "unterminated table", text: "[match\n", problems: []string{"1:7: TOML syntax"}},
		{name: "duplicate key", text: minimal + "interface = \"en1\"\n", problems: []string{"3:1: TOML syntax"}},

		// Keys.
		{name: "typo gets a suggestion", text: minimal + "intreface = \"en0\"\n", problems: []string{`3:1: unknown key "intreface" in [match] (did you mean "interface"?)`}},
		{name: "upper-case key", text: "[match]\nInterface = \"en0\"\n", problems: []string{`2:1: key "Interface" must be lower-case: write "interface"`}},
		{name: "upper-case table", text: minimal + "[Shaper]\nmode = \"off\"\n", problems: []string{`3:2: table "Shaper" must be lower-case: write "shaper"`}},
		{name: "upper-case match table", text: "[Match]\ninterface = \"en0\"\n", problems: []string{`1:2: table "Match" must be lower-case: write "match"`}},
		{name: "upper-case inline match table", text: "MATCH = { interface = \"en0\" }\n", problems: []string{`1:1: table "MATCH" must be lower-case: write "match"`}},
		{name: "unknown table", text: minimal + "[shapper]\n", problems: []string{`3:2: unknown table [shapper] (did you mean [shaper]?)`}},
		{name: "misplaced key", text: "interface = \"en0\"\n" + minimal, problems: []string{`1:1: key "interface" does not belong in the top level; it goes in [match]`}},
		{name: "unknown key lists known keys", text: minimal + "[shaper]\nmode = \"balanced\"\n[balanced]\nwhatever = 1\n", problems: []string{`6:1: unknown key "whatever" in [balanced]; known keys: engage_after, release_after`}},
		{name: "unknown key in inline table", text: minimal + "[autorate]\ndownload = { min = \"5mbit\", maxx = \"9mbit\" }\n", problems: []string{`4:29: unknown key "maxx" in autorate.download (did you mean "max"?)`}},
		{name: "dotted keys work", text: "shaper.mode = \"off\"\n" + minimal},
		{name: "dotted key in the wrong table", text: minimal + "shaper.mode = \"off\"\n", problems: []string{`3:1: key "shaper" does not belong in [match]; it goes in the top level`}},
		{name: "inline match table", text: "match = { interface = \"en0\", priority = 3 }\n"},
		{name: "quoted key", text: "[match]\n\"interface\" = \"en0\"\n\"Priority\" = 1\n", problems: []string{`3:1: key "Priority" must be lower-case`}},

		// Control law.
		{name: "upstream law", text: minimal + "[autorate]\ncontroller = \"upstream\"\n"},
		{name: "unknown law", text: minimal + "[autorate]\ncontroller = \"upstram\"\n", problems: []string{`4:14: autorate.controller: unknown controller "upstram"; use one of macake, upstream (did you mean "upstream"?)`}},

		// Types.
		{name: "int for string", text: "[match]\ninterface = 5\n", problems: []string{"2:13: match.interface: must be a string, not an integer"}},
		{name: "string for int", text: minimal + "priority = \"5\"\n", problems: []string{"3:12: match.priority: must be a whole number, not a string"}},
		{name: "float for int", text: minimal + "[shaper]\noverhead = 1.5\n", problems: []string{"4:12: shaper.overhead: must be a whole number, not 1.5"}},
		{name: "string for bool", text: minimal + "[autorate]\nsleep = \"yes\"\n", problems: []string{"4:9: autorate.sleep: must be true or false, not a string"}},
		{name: "bool for rate", text: minimal + "[shaper]\ndownload = true\n", problems: []string{`4:12: shaper.download: must be a string, e.g. "250mbit" or "auto", not a boolean`}},
		{name: "string for array", text: minimal + "[autorate]\nreflectors = \"1.1.1.1\"\n", problems: []string{"4:14: autorate.reflectors: must be an array"}},
		{name: "string for table", text: minimal + "[autorate]\ndownload = \"10mbit\"\n", problems: []string{`4:12: autorate.download: must be a table, e.g. { min = "25mbit", max = "400mbit" }, not a string`}},
		{name: "table for value", text: minimal + "[shaper.mode]\n", problems: []string{`3:9: shaper.mode: must be a string, e.g. "autorate", not a table`}},
		{name: "empty interface", text: "[match]\ninterface = \"\"\n", problems: []string{"2:13: match.interface: is empty; name the interface this policy shapes"}},
		{name: "empty string", text: minimal + "gateway_ip = \"\"\n", problems: []string{"3:14: match.gateway_ip: is empty"}},
		{name: "date for duration", text: minimal + "[balanced]\nengage_after = 2024-01-01\n", problems: []string{"4:16: balanced.engage_after: must be a string"}, warnings: []string{"3:2: [balanced] is ignored"}},

		// Rates, sizes, durations.
		{name: "mbps", text: minimal + "[shaper]\ndownload = \"100mbps\"\n", problems: []string{`4:12: shaper.download: rate "100mbps": "mbps" is ambiguous (tc reads it as bytes per second); did you mean "100mbit"?`}},
		{name: "bare rate", text: minimal + "[shaper]\nupload = 85000\n", problems: []string{`4:10: shaper.upload: rate "85000" needs a unit; did you mean "85000kbit"? (sqm-scripts uses kbit/s)`}},
		{name: "rate ceiling", text: minimal + "[shaper]\ndownload = \"1001gbit\"\n", problems: []string{"4:12: shaper.download: rate \"1001gbit\" is above 1000gbit, the highest rate macake shapes"}},
		{name: "dummynet's rate ceiling", target: TargetDarwin, text: minimal + "[shaper]\ndownload = \"2.5gbit\"\n[autorate]\ndownload = { max = \"3gbit\" }\n",
			problems: []string{"4:12: shaper.download: 2500mbit is above 2147.483 Mbit/s, the highest rate dummynet shapes; use at most \"2147483kbit\"",
				"6:20: autorate.download.max: 3gbit is above 2147.483 Mbit/s, the highest rate dummynet shapes; use at most \"2147483kbit\""}},
		{name: "above dummynet's rate ceiling on linux", text: minimal + "[shaper]\ndownload = \"17.6gbit\"\n"},
		{name: "unit-less duration", text: minimal + "[autorate]\nprobe_interval = 30\n", problems: []string{`4:18: autorate.probe_interval: duration "30" needs a unit, e.g. "30ms" or "30s"`}},
		{name: "float duration", text: minimal + "[autorate]\nprobe_interval = 0.3\n", problems: []string{`4:18: autorate.probe_interval: duration "0.3" needs a unit`}},
		{name: "bare queue", text: minimal + "[shaper]\nqueue = 100\n", problems: []string{`4:9: shaper.queue: size "100" needs a unit`}},
		{name: "queue too small", text: minimal + "[shaper]\nqueue = \"1KB\"\n", problems: []string{"4:9: shaper.queue: 1KB cannot hold one full-size packet"}},
		{name: "queue too big", text: minimal + "[shaper]\nqueue = \"4097MB\"\n", problems: []string{"4:9: shaper.queue: 4097MB is above 4294967295B, the largest queue any shaper takes"}},
		{name: "queue too big for dummynet", target: TargetDarwin, text: minimal + "[shaper]\nqueue = \"1025KB\"\n", problems: []string{"4:9: shaper.queue: 1025KB is above 1MB, the largest queue dummynet takes; use at most 1MB, or \"auto\""}},
		{name: "queue at dummynet's limit", target: TargetDarwin, text: minimal + "[shaper]\nqueue = \"1MB\"\n"},
		{name: "queue above dummynet's limit on linux", text: minimal + "[shaper]\nqueue = \"2MB\"\n"},

		// Values with a unit written without quotes: a TOML syntax error
		// that must say how to write them, every one of them.
		{name: "unquoted rate", text: minimal + "[shaper]\nupload = 20mbit\n", problems: []string{`4:10: shaper.upload: write the value in quotes: upload = "20mbit"`}},
		{name: "unquoted mbps", text: minimal + "[shaper]\ndownload = 100mbps # from the ISP\n", problems: []string{`4:12: shaper.download: write the value in quotes: download = "100mbit"; "mbps" is ambiguous (tc reads it as bytes per second)`}},
		{name: "unquoted bad unit", text: minimal + "[autorate]\nsleep_after = 3hours\n", problems: []string{`4:15: autorate.sleep_after: write the value in quotes: sleep_after = "3hours"; also, duration "3hours": not a duration`}},
		{name: "unquoted size with space", text: minimal + "[shaper]\nqueue = 1.5 KB\n", problems: []string{`4:9: shaper.queue: write the value in quotes: queue = "1.5 KB"`}},
		{name: "unquoted dotted key", text: minimal + "[autorate]\ndownload.min = 5mbit\n", problems: []string{`4:16: autorate.download.min: write the value in quotes: download.min = "5mbit"`}},
		{name: "unquoted top-level dotted key", text: "shaper.upload = 50mbit\n" + minimal, problems: []string{`1:17: shaper.upload: write the value in quotes: shaper.upload = "50mbit"`}},
		{name: "unit on a number", text: minimal + "[shaper]\noverhead = 18b\n", problems: []string{`4:12: shaper.overhead: takes a plain number, without a unit or quotes: overhead = 18`}},
		{name: "unquoted unknown key", text: minimal + "[shaper]\nrate = 5mbit\n", problems: []string{`4:8: shaper.rate: write the value in quotes: rate = "5mbit"`}},
		{name: "unquoted after unreadable table", text: minimal + "[\"shaper\"]\nupload = 50mbit\n", problems: []string{`4:10: upload: write the value in quotes: upload = "50mbit"`}},
		{name: "unquoted and other problems", text: minimal + "priority = 5000\n[shaper]\ndownload = 100mbit\nupload = 20mbit\noverhead = 300\n[autorate]\nprobe_interval = 30\n", problems: []string{
			"3:12: match.priority: 5000 is outside -1000..1000",
			`5:12: shaper.download: write the value in quotes`,
			`6:10: shaper.upload: write the value in quotes`,
			"7:12: shaper.overhead: 300 bytes is outside 0..256",
			`9:18: autorate.probe_interval: duration "30" needs a unit`,
		}},
		{name: "unquoted and another syntax error", text: minimal + "[shaper]\nupload = 20mbit\nmode = = 1\n", problems: []string{`4:10: shaper.upload: write the value in quotes`, "5:8: TOML syntax"}},
		{name: "unquoted value's own problem is not repeated", text: minimal + "[shaper]\nupload = 2000gbit\n", problems: []string{`4:10: shaper.upload: write the value in quotes: upload = "2000gbit"; also, rate "2000gbit" is above 1000gbit`}},
		{name: "unquoted value takes part in relations", text: minimal + "[shaper]\ndownload = 10mbit\n[autorate]\ndownload = { min = \"20mbit\" }\n", problems: []string{`4:12: shaper.download: write the value in quotes`, "6:20: autorate.download.min: 20mbit is above the base rate shaper.download 10mbit"}},
		{name: "hex integer is TOML", text: minimal + "priority = 0x1f\n"},
		{name: "unit inside a multi-line string is not a value", text: "description = \"\"\"\nx = 5mbit\n\"\"\"\n[match\n", problems: []string{"4:7: TOML syntax"}},

		// Ranges and relations.
		{name: "overhead and mpu", text: minimal + "[shaper]\noverhead = 257\nmpu = -1\n", problems: []string{"4:12: shaper.overhead: 257 bytes is outside 0..256", "5:7: shaper.mpu: -1 bytes is outside 0..256"}},
		{name: "overhead max ok", text: minimal + "[shaper]\noverhead = 256\nmpu = 256\n"},
		{name: "min above base", text: minimal + "[shaper]\ndownload = \"10mbit\"\n[autorate]\ndownload = { min = \"20mbit\" }\n", problems: []string{"6:20: autorate.download.min: 20mbit is above the base rate shaper.download 10mbit"}},
		{name: "base above max", text: minimal + "[shaper]\nupload = \"50mbit\"\n[autorate]\nupload = { max = \"40mbit\" }\n", problems: []string{"4:10: shaper.upload: the base rate shaper.upload 50mbit is above autorate.upload.max 40mbit"}},
		{name: "default base above max", text: minimal + "[autorate]\ndownload = { max = \"10mbit\" }\n", problems: []string{"4:20: autorate.download.max: the base rate shaper.download 20mbit (the default; set shaper.download) is above autorate.download.max 10mbit"}},
		{name: "min above max", text: minimal + "[shaper]\ndownload = \"auto\"\n[autorate]\ndownload = { min = \"50mbit\", max = \"40mbit\" }\n", problems: []string{"6:36: autorate.download.max: 40mbit is below autorate.download.min 50mbit"}},
		{name: "auto max", text: minimal + "[shaper]\ndownload = \"auto\"\n[autorate]\ndownload = { min = \"5mbit\", max = \"auto\" }\n"},
		{name: "priority range", text: minimal + "priority = -1001\n", problems: []string{"3:12: match.priority: -1001 is outside -1000..1000"}},
		{name: "description one line", text: "description = \"\"\"two\nlines\"\"\"\n" + minimal, problems: []string{"1:15: description: must be one line"}},

		// Match keys.
		{name: "interface names", text: "[match]\ninterface = \"pdp_ip0\"\n"},
		{name: "interface upper", text: "[match]\ninterface = \"En0\"\n", problems: []string{`2:13: match.interface: "En0" is not an interface name`}},
		{name: "interface too long", text: "[match]\ninterface = \"abcdefghijklmnop\"\n", problems: []string{`2:13: match.interface: "abcdefghijklmnop" is not an interface name`}},
		{name: "interface digit first", text: "[match]\ninterface = \"0en\"\n", problems: []string{`2:13: match.interface: "0en" is not`}},
		{name: "linux interface names", text: "[match]\ninterface = \"pppoe-wan\"\n"},
		{name: "linux vlan interface", text: "[match]\ninterface = \"eth0.2\"\n"},
		{name: "a macOS service name", text: "[match]\ninterface = \"Wi-Fi\"\n", problems: []string{`2:13: match.interface: "Wi-Fi" is not an interface name`}},
		{name: "interface with a slash", text: "[match]\ninterface = \"eth/0\"\n", problems: []string{`2:13: match.interface: "eth/0" is not an interface name`}},
		{name: "macake's own IFB", text: "[match]\ninterface = \"ifb-macake0\"\n", problems: []string{`2:13: match.interface: "ifb-macake0" is one of macake's own IFB devices`}},
		{name: "missing match", text: "[shaper]\nmode = \"off\"\n", problems: []string{"1:1: [match] needs interface"}},
		{name: "bad mac", text: minimal + "gateway_mac = \"74:24:9f:00:00\"\n", problems: []string{"3:15: match.gateway_mac: \"74:24:9f:00:00\" is not a MAC address"}},
		{name: "zero mac", text: minimal + "gateway_mac = \"00:00:00:00:00:00\"\n", problems: []string{"3:15: match.gateway_mac: 00:00:00:00:00:00 is not a real address"}},
		{name: "multicast mac", text: minimal + "gateway_mac = \"ff:ff:ff:ff:ff:ff\"\n", problems: []string{"3:15: match.gateway_mac: ff:ff:ff:ff:ff:ff is a multicast or broadcast address"}},
		{name: "bad ip", text: minimal + "gateway_ip = \"10.0.0\"\n", problems: []string{`3:14: match.gateway_ip: "10.0.0" is not an IP address`}},
		{name: "unspecified ip", text: minimal + "gateway_ip = \"0.0.0.0\"\n", problems: []string{"3:14: match.gateway_ip: 0.0.0.0 cannot be a gateway"}},
		{name: "ipv6 gateway", text: minimal + "gateway_ip = \"fe80::1\"\n"},
		{name: "ipv6 gateway zoned on the interface", text: minimal + "gateway_ip = \"fe80::1%en0\"\n"},
		{name: "long ssid", text: minimal + "ssid = \"" + strings.Repeat("x", 33) + "\"\n", problems: []string{"3:8: match.ssid: is 33 bytes long"}},

		// Reflectors.
		{name: "empty reflectors", text: minimal + "[autorate]\nreflectors = []\n", problems: []string{"4:14: autorate.reflectors: needs at least one address"}},
		{name: "host name reflector", text: minimal + "[autorate]\nreflectors = [\"1.1.1.1\", \"one.one.one.one\"]\n", problems: []string{`4:26: autorate.reflectors[1]: "one.one.one.one" is a host name`}},
		{name: "duplicate reflector", text: minimal + "[autorate]\nreflectors = [\"1.1.1.1\",\n  \"9.9.9.9\", # comment, \"x\"\n  \"::ffff:1.1.1.1\"]\ncut_refractory = \"2s\"\n", problems: []string{"6:3: autorate.reflectors[2]: ::ffff:1.1.1.1 is listed twice (also reflectors[0])"}},
		{name: "multicast reflector", text: minimal + "[autorate]\nreflectors = [\"224.0.0.1\", \"::\"]\ncut_refractory = \"2s\"\n", problems: []string{"4:15: autorate.reflectors[0]: 224.0.0.1 cannot answer probes", "4:28: autorate.reflectors[1]: :: cannot answer probes"}},
		{name: "reflector kinds", text: minimal + "[autorate]\nreflectors = [\"icmp:1.1.1.1\", \"tcp:8.8.8.8:443\", \"udp:[2001:db8::7]:7\", \"auto:9.9.9.9:443\"]\ncut_refractory = \"2s\"\n"},
		{name: "reflector kind errors", text: minimal + "[autorate]\nreflectors = [\"tcp:1.1.1.1\",\n  \"sctp:8.8.8.8:9\", \"auto:9.9.9.9\", \"udp:1.0.0.1:0\",\n  \"tcp:2606:4700::1111:443\", \"tcp:224.0.0.1:443\"]\n", problems: []string{
			`4:15: autorate.reflectors[0]: "tcp:1.1.1.1": a tcp reflector needs a port, e.g. "tcp:1.1.1.1:443"`,
			`5:3: autorate.reflectors[1]: "sctp:8.8.8.8:9": unknown probe kind "sctp"; use icmp, tcp or udp, or auto`,
			`5:21: autorate.reflectors[2]: "auto:9.9.9.9": an auto reflector names the TCP port measure compares ICMP with, e.g. "auto:9.9.9.9:443"`,
			`5:37: autorate.reflectors[3]: "udp:1.0.0.1:0": port 0 cannot be probed; use 1-65535`,
			`6:3: autorate.reflectors[4]: "tcp:2606:4700::1111:443": a tcp reflector needs a port, after an IPv6 address in brackets (e.g. "tcp:[2606:4700:4700::1111]:443")`,
			`6:30: autorate.reflectors[5]: 224.0.0.1 cannot answer probes`}},
		{name: "one address two kinds", text: minimal + "[autorate]\nreflectors = [\"1.1.1.1\", \"tcp:1.1.1.1:443\"]\ncut_refractory = \"2s\"\n", problems: []string{
			`4:26: autorate.reflectors[1]: 1.1.1.1 is listed twice (also reflectors[0] as "1.1.1.1"); each address is probed one way: to let ` + "`macake measure`" + ` choose between ICMP and TCP, list it once as "auto:1.1.1.1:443"`}},
		{name: "reflector not a string", text: minimal + "[autorate]\nreflectors = [443]\n", problems: []string{`4:15: autorate.reflectors[0]: "443" is not an IP address, nor KIND:ADDRESS[:PORT] with KIND icmp, tcp or udp`}},
		{name: "zoned reflector", text: minimal + "[autorate]\nreflectors = [\"fe80::1%en0\"]\ncut_refractory = \"2s\"\n", problems: []string{"4:15: autorate.reflectors[0]: \"fe80::1%en0\": write the address without a zone"}},
		{name: "zone with control characters", text: minimal + "[autorate]\nreflectors = [\"fe80::1%x\\nok: all good\\u001b[2J\"]\ncut_refractory = \"2s\"\n", problems: []string{`4:15: autorate.reflectors[0]: "fe80::1%x\nok: all good\x1b[2J": write the address without a zone`}},
		{name: "zoned gateway", text: minimal + "gateway_ip = \"fe80::1%en0\\n\"\n", problems: []string{`3:14: match.gateway_ip: "fe80::1%en0\n": the zone must be [match].interface ("en0"), or leave it out`}},
		{name: "table name with escapes", text: minimal + "[\"x\\nok: fine\\u001b]0;t\\u0007\"]\n", problems: []string{`3:1: unknown table [x\nok: fine\x1b]0;t\a]`}},
		{name: "active reflectors above count", text: minimal + "[autorate]\nreflectors = [\"1.1.1.1\"]\nactive_reflectors = 2\ncut_refractory = \"2s\"\n", problems: []string{"5:21: autorate.active_reflectors: 2 is outside 1..1"}},

		// Modes and tables that depend on them.
		{name: "unknown mode", text: minimal + "[shaper]\nmode = \"Fixed\"\n", problems: []string{`4:8: shaper.mode: unknown mode "Fixed"; use one of autorate, balanced, fixed, off (did you mean "fixed"?)`}},
		{name: "fixed needs rates", text: minimal + "[shaper]\nmode = \"fixed\"\n", problems: []string{"4:8: shaper.mode: \"fixed\" needs shaper.download", "4:8: shaper.mode: \"fixed\" needs shaper.upload"}},
		{name: "fixed with auto", text: minimal + "[shaper]\nmode = \"fixed\"\ndownload = \"auto\"\nupload = \"10mbit\"\n"},
		{name: "off ignores rates", text: minimal + "[shaper]\nmode = \"off\"\ndownload = \"10mbit\"\n", warnings: []string{`5:1: shaper.download is ignored: mode "off" shapes nothing`}},
		{name: "balanced outside balanced mode", text: minimal + "[balanced]\nengage_after = \"2s\"\n", warnings: []string{`3:2: [balanced] is ignored: mode is "autorate"`}},
		{name: "bounds in fixed mode", text: minimal + "[shaper]\nmode = \"fixed\"\ndownload = \"9mbit\"\nupload = \"1mbit\"\n[autorate]\ndownload = { max = \"5mbit\" }\n", warnings: []string{`8:1: autorate.download is ignored: mode "fixed"`}},
		{name: "balanced ranges", text: minimal + "[shaper]\nmode = \"balanced\"\n[balanced]\nengage_after = \"10ms\"\nrelease_after = \"48h\"\n", problems: []string{"6:16: balanced.engage_after: 10ms is outside 100ms..1h", "7:17: balanced.release_after: 48h0m0s is outside 1s..24h"}},

		// One direction at a time.
		{name: "starlink: fixed download, adaptive upload", text: minimal + "[shaper]\ndownload_mode = \"fixed\"\ndownload = \"150mbit\"\nupload_mode = \"autorate\"\nupload = \"12mbit\"\n[autorate]\nupload = { min = \"4mbit\", max = \"30mbit\" }\n"},
		{name: "upload only", text: minimal + "[shaper]\ndownload_mode = \"off\"\n"},
		{name: "unknown direction mode", text: minimal + "[shaper]\nupload_mode = \"balanced\"\n", problems: []string{`4:15: shaper.upload_mode: unknown direction mode "balanced"; use one of autorate, fixed, off`}},
		{name: "a fixed direction needs its rate", text: minimal + "[shaper]\ndownload_mode = \"fixed\"\n", problems: []string{`4:17: shaper.download_mode: "fixed" needs shaper.download, the rate to shape at, e.g. download = "100mbit"`}},
		{name: "mode fixed, one direction autorate", text: minimal + "[shaper]\nmode = \"fixed\"\ndownload = \"150mbit\"\nupload_mode = \"autorate\"\n"},
		{name: "mode fixed needs the other rate only", text: minimal + "[shaper]\nmode = \"fixed\"\nupload_mode = \"off\"\n", problems: []string{`4:8: shaper.mode: "fixed" needs shaper.download`}},
		{name: "balanced takes no direction modes", text: minimal + "[shaper]\nmode = \"balanced\"\nupload_mode = \"fixed\"\nupload = \"5mbit\"\n", problems: []string{`5:15: shaper.upload_mode: mode "balanced" engages and releases both directions together`}},
		{name: "off takes no shaped direction", text: minimal + "[shaper]\nmode = \"off\"\ndownload_mode = \"autorate\"\n", problems: []string{`5:17: shaper.download_mode: mode "off" shapes nothing; leave mode out (autorate) to shape download as "autorate"`}},
		{name: "an off direction ignores its rate and bounds", text: minimal + "[shaper]\ndownload_mode = \"off\"\ndownload = \"100mbit\"\n[autorate]\ndownload = { max = \"200mbit\" }\n", warnings: []string{
			`5:1: shaper.download is ignored: download_mode is "off"`, `7:1: autorate.download is ignored: download_mode "off" does not steer it`}},

		// CAKE options.
		{name: "cake on macOS warns", text: minimal + "[cake]\ndiffserv = \"diffserv4\"\nnat = true\n", target: TargetDarwin, warnings: []string{"3:2: cake.diffserv, cake.nat: macOS dummynet cannot do CAKE's options"}},
		{name: "cake on Linux is fine", text: minimal + "[cake]\ndiffserv = \"diffserv4\"\negress_isolation = \"dual-srchost\"\ningress_isolation = \"dual-dsthost\"\nack_filter = true\n", target: TargetLinux},
		{name: "cake bad values", text: minimal + "[cake]\ndiffserv = \"diffserv5\"\negress_isolation = \"dualsrchost\"\n", target: TargetLinux, problems: []string{`4:12: cake.diffserv: unknown diffserv "diffserv5"`, `5:20: cake.egress_isolation: unknown isolation mode "dualsrchost"; use one of triple-isolate, dual-srchost, dual-dsthost, srchost, dsthost, hosts, flows, flowblind (did you mean "dual-srchost"?)`}},

		// Controller tunables.
		{name: "threshold order", text: minimal + "[autorate]\nfull_increase_below = \"40ms\"\n", problems: []string{"4:23: autorate.full_increase_below: full_increase_below (40ms) must not be above delay_threshold (30ms)"}},
		{name: "cut threshold order", text: minimal + "[autorate]\ndelay_threshold = \"80ms\"\n", problems: []string{"4:19: autorate.delay_threshold: full_cut_above (45ms) must not be below delay_threshold (80ms)"}},
		{name: "window and samples", text: minimal + "[autorate]\nbufferbloat_window = 4\nbufferbloat_samples = 5\n", problems: []string{"5:23: autorate.bufferbloat_samples: bufferbloat_samples 5 is outside 1..bufferbloat_window (4)"}},
		{name: "factors", text: minimal + "[autorate]\nmax_cut = 1.2\nmax_increase = 0.9\nhigh_load = 75\n", problems: []string{"4:11: autorate.max_cut: 1.2 is outside (0, 0.99]", "5:16: autorate.max_increase: 0.9 is outside [1, 2]", "6:13: autorate.high_load: 75 is outside (0, 1)"}},
		{name: "nan", text: minimal + "[autorate]\nhigh_load = nan\n", problems: []string{"4:13: autorate.high_load: must be a finite number"}},
		{name: "duration range", text: minimal + "[autorate]\nprobe_interval = \"1ms\"\n", problems: []string{"4:18: autorate.probe_interval: 1ms is outside 10ms..10s"}},
		{name: "explicit active threshold above min", text: minimal + "[shaper]\nupload = \"4mbit\"\n[autorate]\nactive_threshold = \"2mbit\"\n", problems: []string{"6:20: autorate.active_threshold: 2mbit is above the upload minimum rate 1mbit"}},
		// The default threshold is derived from the minimums
		// (desired.ControllerConfig lowers it): no warning about a value
		// the policy does not hold, with a fixed rate as with "auto"
		// (issue 27, item 9).
		{name: "default active threshold above min", text: minimal + "[shaper]\nupload = \"4mbit\"\n"},
		{name: "default active threshold above an auto min", text: minimal + "[shaper]\nupload = \"auto\"\n"},
		{name: "short response deadline", text: minimal + "[autorate]\nresponse_deadline = \"500ms\"\n", warnings: []string{"4:1: response_deadline (500ms) is shorter than two probe intervals (600ms)"}},
		{name: "three reflectors", text: minimal + "[autorate]\nreflectors = [\"1.1.1.1\", \"8.8.8.8\", \"9.9.9.9\"]\n", warnings: []string{"4:1: the bufferbloat window spans 600ms (6 samples 100ms apart, from 3 active reflectors), longer than cut_refractory (200ms)"}},
		{name: "three reflectors, upstream's law", text: minimal + "[autorate]\ncontroller = \"upstream\"\nreflectors = [\"1.1.1.1\", \"8.8.8.8\", \"9.9.9.9\"]\n", warnings: []string{"5:1: the bufferbloat window spans 600ms (6 samples 100ms apart, from 3 active reflectors), longer than cut_refractory (300ms)"}},
		{name: "macake's default refractory, default window", text: minimal + "[autorate]\nreflectors = [\"1.1.1.1\", \"8.8.8.8\", \"9.9.9.9\", \"1.0.0.1\", \"8.8.4.4\", \"9.9.9.10\"]\n"},
		{name: "a refractory the file sets below the window", text: minimal + "[autorate]\ncut_refractory = \"250ms\"\n", warnings: []string{"4:1: the bufferbloat window spans 300ms (6 samples 50ms apart, from 6 active reflectors), longer than cut_refractory (250ms)"}},
		{name: "three reflectors, longer refractory", text: minimal + "[autorate]\nreflectors = [\"1.1.1.1\", \"8.8.8.8\", \"9.9.9.9\"]\ncut_refractory = \"600ms\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.target
			if target == "" {
				target = TargetLinux
			}
			_, probs, warns := parseTest(t, "links.d/test.toml", tc.text, target)
			problemtest.Expect(t, "problems", probs, tc.problems)
			problemtest.Expect(t, "warnings", warns, tc.warnings)
		})
	}
}

// TestThreeProblemsAllReported is the acceptance case: one file
// with three problems reports all three, each at its own position.
func TestThreeProblemsAllReported(t *testing.T) {
	text := `[match]
interface = "en0"

[shaper]
download = "100mbps"
upload   = 20000

[autorate]
probe_interval = 30
`
	_, err := func() (Link, error) { l, _, err := Parse("x.toml", []byte(text), LoadOptions{}); return l, err }()
	want := `x.toml:5:12: shaper.download: rate "100mbps": "mbps" is ambiguous (tc reads it as bytes per second); did you mean "100mbit"?
x.toml:6:12: shaper.upload: rate "20000" needs a unit; did you mean "20000kbit"? (sqm-scripts uses kbit/s)
x.toml:9:18: autorate.probe_interval: duration "30" needs a unit, e.g. "30ms" or "30s"`
	if err == nil || err.Error() != want {
		t.Fatalf("error text:\n%v\nwant:\n%s", err, want)
	}
	if n := len(Problems(err)); n != 3 {
		t.Errorf("%d problems, want 3", n)
	}
}

func TestLinkNameFromFileStem(t *testing.T) {
	for name, ok := range map[string]bool{
		"links.d/starlink.toml":           true,
		"home-cable.toml":                 true,
		"a_b-9.toml":                      true,
		"9.toml":                          true,
		"Starlink.toml":                   false,
		"-x.toml":                         false,
		"two.dots.toml":                   false,
		strings.Repeat("a", 32) + ".toml": true,
		strings.Repeat("a", 33) + ".toml": false,
	} {
		l, _, err := Parse(name, []byte(minimal), LoadOptions{})
		switch {
		case ok && (err != nil || l.Name != strings.TrimSuffix(strings.TrimPrefix(name, "links.d/"), ".toml")):
			t.Errorf("%s: name %q, error %v", name, l.Name, err)
		case !ok && (err == nil || !strings.Contains(err.Error(), name+":1:1: link name")):
			t.Errorf("%s: error %v, want a link-name problem at 1:1", name, err)
		}
	}
}

func TestParseFillsDefaults(t *testing.T) {
	l, _, err := Parse("d.toml", []byte(minimal), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Name != "d" || l.File != "d.toml" || l.Match.Interface != "en0" {
		t.Errorf("identity: %+v", l)
	}
	if l.Shaper.Mode != ModeAutorate || !l.Shaper.Queue.Auto || l.Shaper.Download.Rate != 20*units.Mbit {
		t.Errorf("shaper defaults: %+v", l.Shaper)
	}
	a := l.Autorate
	if a.Controller != LawMacake {
		t.Errorf("controller default = %q, want %q", a.Controller, LawMacake)
	}
	if len(a.Reflectors) != 30 || a.ActiveReflectors != 6 || a.ProbeInterval.Std() != 300*time.Millisecond || a.DelayThreshold.Std() != 30*time.Millisecond {
		t.Errorf("autorate defaults: %+v", a)
	}
	// The copy shares nothing with Defaults.
	l.Autorate.Reflectors[0] = ICMPReflectors([]netip.Addr{netip.MustParseAddr("192.0.2.1")})[0]
	if Defaults.Autorate.Reflectors[0].Addr != netip.MustParseAddr("1.1.1.1") {
		t.Error("Parse handed out Defaults' reflector slice")
	}
}

func TestParseSetsValues(t *testing.T) {
	text := `description = "test"
[match]
interface = "en7"
gateway_mac = "74-24-9F-00-00-01"
gateway_ip = "192.168.1.1"
ssid = "Home"
priority = 4
[shaper]
mode = "balanced"
download = "1.5 Mbit/s"
upload = "auto"
queue = "64KB"
overhead = 44
mpu = 84
[autorate]
download = { min = "1mbit", max = "auto" }
upload = { min = "100kbit", max = "9mbit" }
reflectors = ["9.9.9.9", "2620:fe::fe"]
active_reflectors = 1
probe_interval = "250ms"
delay_threshold = "20ms"
full_increase_below = "5ms"
full_cut_above = "50ms"
bufferbloat_window = 8
bufferbloat_samples = 4
max_cut = 0.8
max_increase = 1.02
high_load = 0.8
active_threshold = "100kbit"
cut_refractory = "2s"
decay_refractory = "2s"
response_deadline = "3s"
sleep = false
sleep_after = "2m"
min_rates_on_sleep = true
[balanced]
engage_after = "2s"
release_after = "30s"
[cake]
diffserv = "besteffort"
egress_isolation = "flows"
ingress_isolation = "hosts"
nat = true
ack_filter = true
wash = true
split_gso = false
rtt = "50ms"
memlimit = "32MB"
link_layer = "ptm"
`
	l, ws, err := Parse("all.toml", []byte(text), LoadOptions{Target: TargetLinux})
	if err != nil || len(ws) != 0 {
		t.Fatalf("err %v, warnings %v", err, ws)
	}
	m, s, a := l.Match, l.Shaper, l.Autorate
	if m.GatewayMAC.String() != "74:24:9f:00:00:01" || m.GatewayIP.String() != "192.168.1.1" || m.SSID != "Home" || m.Priority != 4 || m.Keys() != 3 {
		t.Errorf("match: %+v", m)
	}
	if s.Mode != ModeBalanced || s.Download.Rate != 1500*units.Kbit || !s.Upload.Auto || s.Queue.Size != 64*units.Kilobyte || s.Overhead.Bytes != 44 || s.MPU != 84 {
		t.Errorf("shaper: %+v", s)
	}
	if a.Download.Min != units.Mbit || !a.Download.Max.Auto || a.Upload.Max.Rate != 9*units.Mbit || len(a.Reflectors) != 2 || a.ActiveReflectors != 1 ||
		a.ProbeInterval.Std() != 250*time.Millisecond || a.BufferbloatWindow != 8 || a.MaxCut != 0.8 || a.ActiveThreshold != 100*units.Kbit ||
		a.Sleep || !a.MinRatesOnSleep || a.SleepAfter.Std() != 2*time.Minute {
		t.Errorf("autorate: %+v", a)
	}
	if l.Balanced.EngageAfter.Std() != 2*time.Second || l.Cake != (Cake{Diffserv: "besteffort", EgressIsolation: "flows", IngressIsolation: "hosts", NAT: true, ACKFilter: true,
		Wash: true, SplitGSO: false, RTT: units.Duration(50 * time.Millisecond), MemLimit: 32 * units.Megabyte, LinkLayer: LinkLayerPTM}) {
		t.Errorf("balanced/cake: %+v %+v", l.Balanced, l.Cake)
	}
}

func TestProblemsOfPlainError(t *testing.T) {
	ps := Problems(errors.New("boom"))
	if len(ps) != 1 || ps[0].Message != "boom" || ps[0].Error() != ": boom" && ps[0].Line != 0 {
		t.Errorf("Problems(plain) = %+v", ps)
	}
	if Problems(nil) != nil {
		t.Error("Problems(nil) != nil")
	}
}

// TestUnquotedValuesAllReported is the audit's case: three values written
// without quotes gave one message about TOML's grammar, at the first, and
// hid the other two. Each now says how to write it.
func TestUnquotedValuesAllReported(t *testing.T) {
	text := `[match]
interface = "en0"
[shaper]
download = 100mbps
upload = 20mbit
[autorate]
probe_interval = 300ms
`
	_, _, err := Parse("bare.toml", []byte(text), LoadOptions{})
	want := `bare.toml:4:12: shaper.download: write the value in quotes: download = "100mbit"; "mbps" is ambiguous (tc reads it as bytes per second)
bare.toml:5:10: shaper.upload: write the value in quotes: upload = "20mbit"
bare.toml:7:18: autorate.probe_interval: write the value in quotes: probe_interval = "300ms"`
	if err == nil || err.Error() != want {
		t.Fatalf("error text:\n%v\nwant:\n%s", err, want)
	}
}

// TestFindUnquoted checks which lines count as a bare value with a unit:
// never one inside a string or a value that spans lines.
func TestFindUnquoted(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string // "LINE TABLE KEY VALUE"
	}{
		{"plain", "a = 5mbit\n[t]\nb = 1.5 Mbit/s # c\n", []string{"1  a 5mbit", "3 t b 1.5 Mbit/s"}},
		{"array of tables", "[[t.u]]\nb = 5s\n", []string{"2 t.u b 5s"}},
		{"dotted key", "[t]\na . b = 5s\n", []string{"2 t a . b 5s"}},
		{"CRLF", "a = 5s\r\nb = 6s\r\n", []string{"1  a 5s", "2  b 6s"}},
		{"quoted is fine", "a = \"5mbit\"\nb = '5s'\n", nil},
		{"numbers are fine", "a = 5\nb = 1.5e3\nc = 0x1f\nd = 0o17\ne = 0b101\nf = 1979-05-27\n", nil},
		{"multi-line basic string", "a = \"\"\"\nb = 5s\n\\\"\"\"\nc = 1s\n\"\"\"\nd = 2s\n", []string{"6  d 2s"}},
		{"multi-line literal string", "a = '''x\nb = 5s\n'''\nc = 1s\n", []string{"4  c 1s"}},
		{"multi-line array", "a = [\n  \"]\\\", # ]\n  5s,\n]\nb = 1s\n", []string{"5  b 1s"}},
		{"inline table", "a = { b = 5s }\n", nil},
		{"unterminated string ends with its line", "a = \"x\nb = 5s\n", []string{"2  b 5s"}},
		{"broken table header", "[t\nb = 5s\n", []string{"2 ? b 5s"}},
		{"comment", "# a = 5s\n", nil},
		{"value then text", "a = 5s x\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, u := range tomltext.FindUnquoted(tc.text) {
				table := u.Table.String()
				if !u.TableKnown {
					table = "?"
				}
				got = append(got, fmt.Sprintf("%d %s %s %s", u.Line, table, u.Key, u.Value))
				if tc.text[u.Start:u.End] != u.Value {
					t.Errorf("offsets %d..%d hold %q, not %q", u.Start, u.End, tc.text[u.Start:u.End], u.Value)
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// A framing keyword as [shaper] overhead stands for its bytes, its mpu and
// its link layer, each unless the file gives it; the link reaches the
// backends with all three.
func TestOverheadFramingKeyword(t *testing.T) {
	for _, c := range []struct {
		name, extra         string
		overhead, mpu       int
		linkLayer           LinkLayer
		wantCakeLinkLayer   string
		wantWarningContains string
	}{
		{name: "docsis", overhead: 18, mpu: 64, linkLayer: LinkLayerNone},
		{name: "ethernet", overhead: 38, mpu: 84, linkLayer: LinkLayerNone},
		{name: "pppoe-ptm", overhead: 30, linkLayer: LinkLayerPTM, wantCakeLinkLayer: "ptm"},
		{name: "pppoe-vcmux", overhead: 32, linkLayer: LinkLayerATM, wantCakeLinkLayer: "atm"},
		{name: "pppoe-vcmux", extra: "mpu = 96\n[cake]\nlink_layer = \"none\"\n", overhead: 32, mpu: 96, linkLayer: LinkLayerNone},
	} {
		text := "[match]\ninterface = \"eth0\"\n[shaper]\noverhead = \"" + c.name + "\"\n" + c.extra
		l, ws, err := Parse("k.toml", []byte(text), LoadOptions{Target: TargetLinux})
		if err != nil || len(ws) != 0 {
			t.Fatalf("%s: err %v, warnings %v", c.name, err, ws)
		}
		if l.Shaper.Overhead.Bytes != c.overhead || l.Shaper.Overhead.Keyword != c.name || l.Shaper.MPU != c.mpu || l.Cake.LinkLayer != c.linkLayer {
			t.Errorf("%s %q: overhead %+v mpu %d link layer %q", c.name, c.extra, l.Shaper.Overhead, l.Shaper.MPU, l.Cake.LinkLayer)
		}
		sc := l.ShapeCake()
		if sc == nil || sc.Overhead != c.overhead || sc.MPU != c.mpu || sc.LinkLayer != c.wantCakeLinkLayer {
			t.Errorf("%s: ShapeCake = %+v", c.name, sc)
		}
	}
	// On macOS the cells cannot be counted, and the file is told so.
	_, ws, err := Parse("k.toml", []byte("[match]\ninterface = \"en0\"\n[shaper]\noverhead = \"pppoe-vcmux\"\n"), LoadOptions{Target: TargetDarwin})
	if err != nil || len(ws) != 1 || !strings.Contains(ws[0].String(), "ATM cells, which dummynet cannot count") {
		t.Errorf("darwin: %v %v", ws, err)
	}
	for text, want := range map[string]string{
		"overhead = \"dosis\"":                        `did you mean "docsis"?`,
		"overhead = 1.5":                              "must be a whole number",
		"overhead = 300":                              "300 bytes is outside 0..256",
		"[cake]\nrtt = \"20s\"":                       "20s is outside 100µs..10s",
		"[cake]\nmemlimit = \"1KB\"":                  "1KB is outside 64KB..",
		"[cake]\nlink_layer = \"adsl\"":               `unknown link layer "adsl"`,
		"[cake]\ndiffserv = \"precedence\"\nwash = 1": "must be true or false",
	} {
		_, _, err := Parse("k.toml", []byte("[match]\ninterface = \"eth0\"\n[shaper]\n"+text+"\n"), LoadOptions{Target: TargetLinux})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}

// LoadOptions.CheckCake's refusals are problems at their keys; a key the
// file does not write is reported at [cake]; a policy with other problems
// is not tried.
func TestCheckCakeRefusalsAreProblemsAtTheirKeys(t *testing.T) {
	var tried []shape.Cake
	check := func(c *shape.Cake) []CakeRefusal {
		tried = append(tried, *c)
		return []CakeRefusal{{Key: "cake.wash", Message: `CAKE's "wash" refused: What is "wash"?`}, {Key: "cake.split_gso", Message: "split-gso refused"}}
	}
	text := "[match]\ninterface = \"eth0\"\n[cake]\nnat = true\nwash = true\n"
	_, _, err := Parse("w.toml", []byte(text), LoadOptions{Target: TargetLinux, CheckCake: check})
	ps := Problems(err)
	if len(ps) != 2 || ps[1].Line != 5 || !strings.Contains(ps[1].Message, `cake.wash: CAKE's "wash" refused`) ||
		ps[0].Line != 3 || !strings.Contains(ps[0].Message, "cake: split-gso refused") {
		t.Errorf("problems %v", ps)
	}
	if len(tried) != 1 || !tried[0].Wash || !tried[0].NAT {
		t.Errorf("tried %+v", tried)
	}
	tried = nil
	if _, _, err := Parse("w.toml", []byte(text+"rtt = \"1h\"\n"), LoadOptions{Target: TargetLinux, CheckCake: check}); err == nil || len(tried) != 0 {
		t.Errorf("an invalid policy was tried (%v): %v", tried, err)
	}
}
