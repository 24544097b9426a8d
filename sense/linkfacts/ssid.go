// SPDX-License-Identifier: Apache-2.0

package linkfacts

import (
	"bufio"
	"strings"
)

// SSID parsers for the tools that may still disclose it. Every one rejects
// the redaction placeholders of recent macOS, so a hidden SSID reads as
// "unknown", never as a network called "<redacted>".

// usableSSID filters placeholders and empty values.
func usableSSID(s string) string {
	s = strings.TrimSpace(s)
	switch {
	case s == "", s == "<redacted>", strings.EqualFold(s, "<SSID Redacted>"), strings.HasPrefix(s, "You are not associated"):
		return ""
	}
	return s
}

// parseIPConfigSummary reads `ipconfig getsummary IF` (macOS): the line
// "  SSID : NAME". macOS 15.6 and later print "<redacted>".
func parseIPConfigSummary(out string) string {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " : ")
		if ok && strings.TrimSpace(k) == "SSID" {
			return usableSSID(v)
		}
	}
	return ""
}

// parseAirportNetwork reads `networksetup -getairportnetwork IF` (macOS
// before 15): "Current Wi-Fi Network: NAME".
func parseAirportNetwork(out string) string {
	for _, prefix := range []string{"Current Wi-Fi Network: ", "Current AirPort Network: "} {
		if _, v, ok := strings.Cut(out, prefix); ok {
			v, _, _ = strings.Cut(v, "\n")
			return usableSSID(v)
		}
	}
	return ""
}

// parseHardwarePorts reads `networksetup -listallhardwareports` and returns
// the devices of the Wi-Fi (or AirPort) ports.
func parseHardwarePorts(out string) []string {
	var devs []string
	wifi := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "Hardware Port: "); ok {
			wifi = v == "Wi-Fi" || v == "AirPort"
			continue
		}
		if v, ok := strings.CutPrefix(line, "Device: "); ok && wifi {
			devs = append(devs, strings.TrimSpace(v))
			wifi = false
		}
	}
	return devs
}

// parseIwLink reads `iw dev IF link` (Linux): "\tSSID: NAME", or
// "Not connected.".
func parseIwLink(out string) string {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "SSID: "); ok {
			return usableSSID(v)
		}
	}
	return ""
}
