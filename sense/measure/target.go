// SPDX-License-Identifier: Apache-2.0

package measure

import (
	"net/netip"
	"time"

	"github.com/macake/macake/sense/linkfacts"
	"github.com/macake/macake/state"
)

// Target is what a measurement measures: the link (policy) if one applies,
// its interface and gateway, and the reflectors.
type Target struct {
	// Link is the policy name, or "" when no policy applies.
	Link string
	// Interface carries the traffic (the link's, else the default route's).
	Interface string
	// Facts are the interface's facts (gateway IP and MAC, when known).
	Facts linkfacts.InterfaceFacts
	// Reflectors are the ICMP targets; ProbeInterval the per-reflector
	// interval.
	Reflectors    []netip.Addr
	ProbeInterval time.Duration
	// Note explains a fallback (printed on stderr).
	Note string
}

// ProfileKey is the state key of the measured profile: the link name (or
// the interface when no policy applies) plus the gateway MAC.
func (t Target) ProfileKey() string {
	name := t.Link
	if name == "" {
		name = t.Interface
	}
	return state.ProfileKey(name, t.Facts.GatewayMAC.String())
}
