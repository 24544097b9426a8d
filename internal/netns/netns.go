// SPDX-License-Identifier: Apache-2.0

// Package netns builds throw-away Linux network namespaces for tests: a
// [Lab] creates namespaces, veth pairs between them, addresses and routes,
// turns segmentation offloads off, allows unprivileged ICMP, and shapes a
// device into a bloated bottleneck (htb at a rate with a deep bfifo) whose
// rate can be changed while traffic flows, and plays reflectors at the end
// of a path of fixed delay (ICMP echo, UDP echo, TCP handshakes), which
// the kernel cannot delay itself here (no netem). Code runs inside a namespace
// either in-process ([Namespace.Do], [Namespace.Listen], [Namespace.Dial])
// or as a child process ([Namespace.Exec], [Namespace.RunTest]).
//
// The labs tests share: [Lab.Pair] (a client and a server on one veth
// pair), [Lab.Uplinks] (a client with an uplink per router,
// [Uplinks.Multihome] for default routes through all of them), and
// [Namespace.WAN] (a bloated ISP's link, both directions, the upload
// through an IFB device).
//
// Everything is removed in the test's Cleanup. Names carry a caller prefix
// and the process id, so parallel test binaries never collide. Tests skip
// (with the reason) when not root or when ip(8) is missing.
//
// Facts this harness relies on (measured on the project's CI kernel): a new
// namespace starts with net.ipv4.ping_group_range "1 0" (no one may open
// ICMP datagram sockets, root included), inherits BBR as its default
// congestion control (which hides bufferbloat: load sockets must ask for
// cubic), and veth devices aggregate 64 KB super-packets unless TSO, GSO
// and GRO are turned off.
package netns

import "fmt"

// Rate formats bits per second for tc ("50000000bit").
func Rate(bitsPerSecond int64) string { return fmt.Sprintf("%dbit", bitsPerSecond) }
