// SPDX-License-Identifier: Apache-2.0

// Package e2e proves macake's loop on a real Linux kernel: real CUBIC TCP
// through a bloated ISP bottleneck in network namespaces, with the real
// macake binary shaping the client's interface through the tc backend.
//
// The testbed (Testbed, Linux only) is three namespaces joined by veth
// pairs:
//
//	client (wan0, macake) ── ISP (htb at C(t), bfifo of 1 s of peak C, both ways) ── server
//
// The ISP's capacity follows a trace (testdata/traces: constant, steps,
// and a synthetic Starlink-like wobble from StarlinkLike). The server
// answers ICMP at six reflector addresses (the controller's), and at
// another address, which macake does not exempt, it echoes the user's ping
// (a UDP echo the size of ping's, 10 a second) and holds the far end of a
// call (50 packets/s of 200 bytes each way, its one-way delay measured
// directly: every namespace shares the host's clock); it also serves bulk
// TCP both ways. Each phase measures the ping idle, then under 4 download
// flows while the trace replays; added delay is like for like at each
// percentile (loaded p50 − idle p50, loaded p90 − idle p90) over every
// ping sent, a lost one counting as 1 s (package score), with the loss
// beside it; goodput is TCP payload. A run is drift-controlled: unshaped,
// shaped, unshaped again, on the same trace segment.
//
// TestICMPPriority runs the same testbed behind an ISP that gives ICMP
// strict priority (netns.PriorityBottleneck: htb serves an ICMP class
// within its guarantee before the bulk class that borrows; this kernel has
// no prio qdisc): ICMP-only control against "auto" reflectors, for which
// `macake measure` first compares ICMP with TCP handshakes to port 443.
//
// `go test ./e2e` (root; otherwise the tests skip and say so) runs it
// with short phases and asserts the direction of the result; `make e2e`
// runs longer phases on every trace and prints the tables that
// docs/MEASUREMENTS.md quotes. The same package holds the CLI-level fault
// tests of the tc backend (a kernel without CAKE or IFB, drift, a foreign
// qdisc, tc failing mid-apply, a renamed interface).
package e2e
