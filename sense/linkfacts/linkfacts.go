// SPDX-License-Identifier: Apache-2.0

// Package linkfacts tells which network the machine is on: the interfaces
// that are up, the gateway IP and gateway MAC of each (the MAC is the
// stable identity of a network; SSIDs are mostly hidden on modern macOS),
// which interface carries the default route, and the SSID as an optional
// label where the OS still discloses it. It produces [Facts], the
// input of desired.Match.
//
// Sources: macOS routing sysctls through golang.org/x/net/route (the route
// dump for gateways, the RTF_LLINFO dump for MACs, like arp -an) and a
// PF_ROUTE socket for change events; Linux rtnetlink (link, route and
// neighbour dumps, and multicast groups for change events). Setting
// MACAKE_LINK_FACTS=FILE replaces detection with a JSON file in the
// Facts shape; rewriting the file is noticed like a network change.
//
// [Watch] turns change events into a level-triggered stream: after any
// event (debounced) or poll tick it re-reads everything and emits the facts
// only when they differ, or when the machine has just woken from sleep
// (detected from the gap between the wall clock and a clock that stops
// during sleep), because after sleep every measurement must re-baseline.
package linkfacts

import (
	"context"
	"io"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/macake/macake/config"
)

// EnvFile names the environment variable whose file replaces detection.
const EnvFile = "MACAKE_LINK_FACTS"

// Source produces the current link facts.
type Source interface {
	// Facts reads the facts now. It may be called repeatedly.
	Facts(ctx context.Context) (Facts, error)
}

// Notifier is implemented by sources that can tell when their facts may
// have changed (a routing socket, netlink groups, a watched file). A
// notification carries no payload: the watcher re-reads everything.
type Notifier interface {
	// Changes returns a channel that receives a value after each change
	// event, until ctx ends. An error means no events: poll instead.
	Changes(ctx context.Context) (<-chan struct{}, error)
}

// FromEnv returns the file source when MACAKE_LINK_FACTS is set, and the
// system detector otherwise. getenv is os.Getenv outside tests.
func FromEnv(getenv func(string) string, opts SystemOptions) (Source, error) {
	if path := getenv(EnvFile); path != "" {
		return &FileSource{Path: path}, nil
	}
	return NewSystem(opts)
}

// PolicyOptions are the detector options of every command that matches
// policies to the network (apply, links, status, doctor, measure and
// watch): the SSID, because a policy may match on it, and resolving a
// gateway MAC the neighbour table lacks, because a policy may match on
// gateway_mac and the entry can be missing right after a network change.
// One set of options for all of them, so that a policy that matches in
// one command matches in every other.
func PolicyOptions() SystemOptions {
	return SystemOptions{SSID: true, ResolveGatewayMAC: true}
}

// Read reads the facts once, from the source FromEnv chooses with
// PolicyOptions, and closes that source.
func Read(ctx context.Context, getenv func(string) string) (Facts, error) {
	src, err := FromEnv(getenv, PolicyOptions())
	if err != nil {
		return Facts{}, err
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	return src.Facts(ctx)
}

// osInterface, osRoute and osNeighbor are what each OS backend reads,
// reduced to plain data so that assembling the facts is portable and
// tested everywhere.
type osInterface struct {
	Index    int
	Name     string
	Up       bool // administratively up and running (carrier)
	Loopback bool
}

type osRoute struct {
	Index int // outgoing interface
	// Gateway is the next hop; it is not valid for a device-only default
	// (PPPoE, WireGuard, a tun device): the link itself is the way out.
	Gateway netip.Addr
	// IPv4 marks the route's family, which Gateway tells too when valid.
	IPv4 bool
	// Scoped marks a darwin interface-scoped default (RTF_IFSCOPE): the
	// default of a non-primary service, never the system's default.
	Scoped bool
	// Metric orders several defaults (Linux priority); lower wins.
	Metric int
}

type osNeighbor struct {
	Index int
	IP    netip.Addr
	MAC   net.HardwareAddr
}

// assemble builds the facts from what the OS reported: one entry per
// non-loopback interface, sorted by name; each with the gateway of its
// best default route (IPv4 preferred) and that gateway's MAC when the
// neighbour table has it; Default set on the interface of the best
// unscoped default route.
func assemble(ifaces []osInterface, routes []osRoute, neigh []osNeighbor, ssid map[string]string) Facts {
	is4 := func(r osRoute) bool { return r.Gateway.Is4() || (!r.Gateway.IsValid() && r.IPv4) }
	better := func(a, b osRoute) bool { // a is a better default than b
		if is4(a) != is4(b) {
			return is4(a)
		}
		if a.Scoped != b.Scoped {
			return !a.Scoped
		}
		return a.Metric < b.Metric
	}
	// On one interface, a route with a next hop names the gateway a
	// policy can match, so it wins over a device-only one.
	betterOnIface := func(a, b osRoute) bool {
		if a.Gateway.IsValid() != b.Gateway.IsValid() {
			return a.Gateway.IsValid()
		}
		return better(a, b)
	}
	perIface := map[int]osRoute{}
	var primary *osRoute
	for i, r := range routes {
		if cur, ok := perIface[r.Index]; !ok || betterOnIface(r, cur) {
			perIface[r.Index] = r
		}
		if !r.Scoped && (primary == nil || better(r, *primary)) {
			primary = &routes[i]
		}
	}
	var f Facts
	for _, ifi := range ifaces {
		if ifi.Loopback || ifi.Name == "" {
			continue
		}
		fi := InterfaceFacts{Name: ifi.Name, Up: ifi.Up, SSID: ssid[ifi.Name]}
		if r, ok := perIface[ifi.Index]; ok {
			if r.Gateway.IsValid() {
				fi.GatewayIP = r.Gateway.WithZone("")
				fi.GatewayMAC = lookupMAC(neigh, ifi.Index, r.Gateway)
			}
			fi.Default = primary != nil && primary.Index == ifi.Index
		}
		f.Interfaces = append(f.Interfaces, fi)
	}
	sort.Slice(f.Interfaces, func(i, j int) bool { return f.Interfaces[i].Name < f.Interfaces[j].Name })
	return f
}

func lookupMAC(neigh []osNeighbor, index int, ip netip.Addr) config.HardwareAddr {
	for _, n := range neigh {
		if n.Index == index && n.IP.WithZone("") == ip.WithZone("") && len(n.MAC) == 6 && !allZero(n.MAC) {
			return config.HardwareAddr(slices.Clone(n.MAC))
		}
	}
	return nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// DefaultInterface returns the facts of the interface carrying the default
// route.
func DefaultInterface(f Facts) (InterfaceFacts, bool) {
	for _, i := range f.Interfaces {
		if i.Default {
			return i, true
		}
	}
	return InterfaceFacts{}, false
}

// Equal reports whether two sets of facts describe the same network state.
func Equal(a, b Facts) bool {
	if len(a.Interfaces) != len(b.Interfaces) {
		return false
	}
	for i := range a.Interfaces {
		x, y := a.Interfaces[i], b.Interfaces[i]
		if x.Name != y.Name || x.Up != y.Up || x.GatewayIP != y.GatewayIP || !x.GatewayMAC.Equal(y.GatewayMAC) || x.SSID != y.SSID || x.Default != y.Default {
			return false
		}
	}
	return true
}

// Describe renders facts on one line for logs, e.g.
// "en0 up gw 192.168.1.1 (74:24:9f:00:00:01) default; en1 down".
func Describe(f Facts) string {
	var parts []string
	for _, i := range f.Interfaces {
		var b strings.Builder
		b.WriteString(i.Name)
		if i.Up {
			b.WriteString(" up")
		} else {
			b.WriteString(" down")
		}
		if i.GatewayIP.IsValid() {
			b.WriteString(" gw " + i.GatewayIP.String())
			if len(i.GatewayMAC) > 0 {
				b.WriteString(" (" + i.GatewayMAC.String() + ")")
			}
		}
		if i.SSID != "" {
			b.WriteString(" ssid " + i.SSID)
		}
		if i.Default {
			b.WriteString(" default")
		}
		parts = append(parts, b.String())
	}
	if len(parts) == 0 {
		return "no interfaces"
	}
	return strings.Join(parts, "; ")
}
