// SPDX-License-Identifier: Apache-2.0

// Package linkchanges logs, once per pass, every interface whose active
// link changed, with what changed in its facts (Log): the interface going
// up or down, a new gateway, another SSID, or the policy files.
package linkchanges

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/macake/macake/desired"
	"github.com/macake/macake/logging"
	"github.com/macake/macake/metrics"
	"github.com/macake/macake/sense/linkfacts"
)

// Log logs every interface whose active link changes between passes,
// with what changed in its facts. Make one with New; it is used by one
// goroutine (the daemon's loop).
type Log struct {
	ev      logging.Events
	metrics *metrics.Metrics
	// active maps an interface to its active link as of the last pass,
	// whose facts were facts.
	active  map[string]string
	facts   linkfacts.Facts
	matched bool
}

// New returns a Log that says the changes through ev and counts them in
// m (nil: no metrics).
func New(ev logging.Events, m *metrics.Metrics) Log {
	return Log{ev: ev, metrics: m, active: map[string]string{}}
}

// Note logs the changes of sel (matched on facts) since the last pass.
func (c *Log) Note(ctx context.Context, sel desired.Selection, facts linkfacts.Facts) {
	now := map[string]string{}
	for _, l := range sel.Active {
		now[l.Match.Interface] = l.Name
	}
	first := !c.matched
	c.matched = true
	ifaces := slices.Sorted(maps.Keys(now))
	for i := range c.active {
		if _, ok := now[i]; !ok {
			ifaces = append(ifaces, i)
		}
	}
	for _, i := range ifaces {
		from, to := c.active[i], now[i]
		if from == to {
			continue
		}
		reason := "start"
		if !first {
			reason = factsChange(i, c.facts, facts)
		}
		c.ev.LinkChanged(ctx, logging.LinkChange{Interface: i, From: from, To: to, Reason: reason})
		if c.metrics != nil {
			c.metrics.LinkChanged()
		}
	}
	c.active = now
	c.facts = facts
}

// factsChange describes how an interface's facts changed from before to
// after, or says that the policies did.
func factsChange(iface string, before, after linkfacts.Facts) string {
	b, had := before.Interface(iface)
	a, has := after.Interface(iface)
	var parts []string
	if had != has || b.Up != a.Up {
		parts = append(parts, fmt.Sprintf("%s %s -> %s", iface, upDown(had && b.Up), upDown(has && a.Up)))
	}
	if !b.GatewayMAC.Equal(a.GatewayMAC) {
		parts = append(parts, fmt.Sprintf("gateway %s -> %s", orNone(b.GatewayMAC.String()), orNone(a.GatewayMAC.String())))
	}
	if b.GatewayIP != a.GatewayIP {
		parts = append(parts, fmt.Sprintf("gateway ip %s -> %s", orNone(addrText(b.GatewayIP.IsValid(), b.GatewayIP.String())), orNone(addrText(a.GatewayIP.IsValid(), a.GatewayIP.String()))))
	}
	if b.SSID != a.SSID {
		parts = append(parts, fmt.Sprintf("ssid %s -> %s", orNone(b.SSID), orNone(a.SSID)))
	}
	if len(parts) == 0 {
		return "policy files changed"
	}
	return strings.Join(parts, ", ")
}

func upDown(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func addrText(valid bool, s string) string {
	if !valid {
		return ""
	}
	return s
}
